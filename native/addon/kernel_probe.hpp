// What the running kernel offers for seccomp user notification, found out at start by trying it,
// not by reading the version: a throwaway filter with NEW_LISTENER in a forked child, whose
// listener is asked for NOTIF_SET_FLAGS(SYNC_WAKE_UP). Nothing of the caller's own is touched.
#pragma once
#include <string>

namespace seccomp_agent {

struct KernelFeatures {
  // NOTIF_SET_FLAGS(SYNC_WAKE_UP) succeeded on a listener (6.6+).
  bool sync_wake_up = false;
  // What the probe saw, for the log: "NOTIF_SET_FLAGS(SYNC_WAKE_UP) accepted", the errno text of
  // the ioctl that refused it, or why the probe itself could not run.
  std::string detail;
};

// Any thread; blocks for the child's life (a few ms: fork, one filter, one ioctl, exit). The child
// makes only raw system calls between fork and _exit, so it is safe in a multi-threaded process.
KernelFeatures ProbeKernelFeatures();

}  // namespace seccomp_agent
