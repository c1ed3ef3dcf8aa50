#include "nshelper_answer.hpp"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "notify_fd.hpp"
#include "seccomp_compat.h"
#include "unique_fd.h"

namespace nshelper {
namespace {

// The target's fd 0, as a descriptor of ours, and its close-on-exec flag; -1 when it cannot be put
// back without a trace.
int TakeStdin(int stdin_info, int pidfd, bool* cloexec) {
  if (stdin_info < 0 || pidfd < 0) return -1;
  char text[4096];
  const ssize_t n = pread(stdin_info, text, sizeof text - 1, 0);
  if (n <= 0 || size_t(n) == sizeof text - 1) return -1;  // a long one lists locks: not ours to touch
  text[n] = 0;
  if (!ParseFdinfoReplaceable(text, cloexec)) return -1;
  return int(syscall(SYS_pidfd_getfd, pidfd, 0, 0));
}

}  // namespace

bool ParseFdinfoReplaceable(const char* text, bool* cloexec) {
  bool flags = false;
  for (const char* line = text; line != nullptr && *line != '\0';) {
    if (strncmp(line, "lock:", 5) == 0) return false;
    if (strncmp(line, "flags:", 6) == 0) {
      char* end = nullptr;
      const unsigned long value = strtoul(line + 6, &end, 8);
      flags = end != line + 6;
      *cloexec = (value & O_CLOEXEC) != 0;
    }
    const char* next = strchr(line, '\n');
    line = next != nullptr ? next + 1 : nullptr;
  }
  return flags;
}

Delivery AnswerZero(int notify_fd, uint64_t id, int stdin_info, int pidfd, int* err) {
  bool cloexec = false;
  Fd same(TakeStdin(stdin_info, pidfd, &cloexec));
  if (same.get() >= 0) {
    seccomp_notif_addfd add = {};
    add.id = id;
    add.flags = SECCOMP_ADDFD_FLAG_SETFD | SECCOMP_ADDFD_FLAG_SEND;
    add.srcfd = uint32_t(same.get());
    add.newfd = 0;
    add.newfd_flags = cloexec ? O_CLOEXEC : 0;
    // No EINTR here: the helper takes no signal but SIGKILL.
    if (ioctl(notify_fd, SECCOMP_IOCTL_NOTIF_ADDFD, &add) == 0) return Delivery::kTaken;
    // ESRCH: the target left its wait with the request queued; ENOENT: before it was queued.
    if (errno == ESRCH || errno == ENOENT) {
      *err = ENOENT;
      return Delivery::kDropped;
    }
    // Refused (an LSM, an old kernel: EINVAL; the install failed): the notification is still
    // waiting for an answer (the kernel puts it back when the install fails), given plainly below.
  }
  if (seccomp_agent::NotifySendErrno(notify_fd, id, 0, err)) return Delivery::kSent;
  return *err == ENOENT ? Delivery::kDropped : Delivery::kFailed;
}

}  // namespace nshelper
