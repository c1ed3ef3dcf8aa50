#include "kernel_probe.hpp"

#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <poll.h>
#include <stddef.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "seccomp_compat.h"

namespace seccomp_agent {
namespace {

// What the child reports through the pipe: the step that failed (0: none) and its errno.
struct ProbeReport {
  int32_t failed_step;
  int32_t err;
};

enum Step : int32_t { kOk = 0, kNoNewPrivs = 1, kFilter = 2, kSetFlags = 3 };

// Child of fork(): raw system calls only, then _exit. Notifies getppid, which it never calls.
[[noreturn]] void ProbeChild(int report_fd) {
  struct sock_filter prog[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_getppid, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_USER_NOTIF),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  struct sock_fprog fprog = {static_cast<unsigned short>(sizeof prog / sizeof prog[0]), prog};
  ProbeReport report = {kOk, 0};
  long listener = -1;
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
    report = {kNoNewPrivs, errno};
  } else if ((listener = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER, &fprog)) < 0) {
    report = {kFilter, errno};
  } else if (ioctl(static_cast<int>(listener), SECCOMP_IOCTL_NOTIF_SET_FLAGS,
                   static_cast<unsigned long>(SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP)) != 0) {
    report = {kSetFlags, errno};
  }
  ssize_t ignored = write(report_fd, &report, sizeof report);
  (void)ignored;
  _exit(0);
}

std::string ErrnoText(int err) {
  char buf[128];
  // GNU strerror_r returns the text (maybe not in buf).
  return strerror_r(err, buf, sizeof buf);
}

}  // namespace

KernelFeatures ProbeKernelFeatures() {
  KernelFeatures features;
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    features.detail = "probe not run: pipe2: " + ErrnoText(errno);
    return features;
  }
  pid_t child = fork();
  if (child == 0) {
    close(fds[0]);
    ProbeChild(fds[1]);
  }
  close(fds[1]);
  if (child < 0) {
    features.detail = "probe not run: fork: " + ErrnoText(errno);
    close(fds[0]);
    return features;
  }
  ProbeReport report = {-1, 0};
  ssize_t n;
  do {
    n = read(fds[0], &report, sizeof report);
  } while (n < 0 && errno == EINTR);
  close(fds[0]);
  int status = 0;
  while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  if (n != static_cast<ssize_t>(sizeof report)) {
    features.detail = "probe child ended without a report";
    return features;
  }
  switch (report.failed_step) {
    case kOk:
      features.sync_wake_up = true;
      features.detail = "NOTIF_SET_FLAGS(SYNC_WAKE_UP) accepted";
      break;
    case kNoNewPrivs:
      features.detail = "probe not run: prctl(PR_SET_NO_NEW_PRIVS): " + ErrnoText(report.err);
      break;
    case kFilter:
      features.detail = "probe not run: seccomp(SET_MODE_FILTER, NEW_LISTENER): " + ErrnoText(report.err);
      break;
    default:
      features.detail = "NOTIF_SET_FLAGS(SYNC_WAKE_UP) refused: " + ErrnoText(report.err) + " (kernel < 6.6)";
      break;
  }
  return features;
}

}  // namespace seccomp_agent
