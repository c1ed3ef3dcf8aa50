// The answer to a notification whose emulation took effect, and whether its target took it
// (docs/emulation.md, "Exactly once").
//
// NOTIF_SEND returning 0 is no proof that the program saw the answer: when a signal reaches the
// target just before the answer does, the kernel takes the answer and yet the target, already on
// its way out of its wait, drops it and restarts the call (kernel/seccomp.c: the interrupted path
// does not look at the reply). Measured: 106 to 142 of 6,000 mkdirs under a 100 µs timer, with no
// signal visible in /proc/<tid>/status just before the answer or just after it (the target is
// faster than a read of it). Told apart from a program that makes the same call again on purpose,
// a restart can only be guessed (the replay book used to keep every answer 1 s for it, and so gave
// the program's own second mkdir 0 instead of EEXIST).
//
// The kernel has one answer whose delivery it confirms: SECCOMP_IOCTL_NOTIF_ADDFD with
// SECCOMP_ADDFD_FLAG_SEND (5.14) installs a file in the target and makes the call return its fd
// number, and the target does both itself, in its own context, before the ioctl returns that
// number; a target that left its wait first clears the request and the ioctl says ESRCH. The
// number is the call's return value, and an emulated mkdir or mount returns 0: so the file
// installed is the target's own fd 0, taken with pidfd_getfd and put back at 0 with its
// close-on-exec flag, which leaves its descriptor table as it was. Where that cannot be done
// without a trace (no fd 0; a POSIX lock on fd 0's file, which closing that slot releases), or the
// kernel refuses it, the answer is a plain NOTIF_SEND and its delivery stays unknown.
#pragma once
#include <stdint.h>
#include <sys/types.h>

namespace nshelper {

enum class Delivery {
  kTaken,    // the target has it: the call returned 0 to the program
  kDropped,  // the target had left its wait (a signal): the call comes back, or never (a fatal one)
  kSent,     // NOTIF_SEND took it: whether the target kept it is unknown
  kFailed,   // not answered (*err)
};

// Answers notification `id` of `notify_fd` with 0. `stdin_info`: the notifying task's
// /proc/<tid>/fdinfo/0, `pidfd` its own pidfd (-1 either: a plain NOTIF_SEND).
Delivery AnswerZero(int notify_fd, uint64_t id, int stdin_info, int pidfd, int* err);

// From the text of /proc/<tid>/fdinfo/<fd>: whether the descriptor can be put back in place with
// nothing changed (no POSIX lock of the process on its file) and, then, whether it is
// close-on-exec. Pure: no syscall.
bool ParseFdinfoReplaceable(const char* text, bool* cloexec);

}  // namespace nshelper
