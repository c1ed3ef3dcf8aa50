#include "notify_fd.hpp"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "seccomp_compat.h"

namespace seccomp_agent {
namespace {

size_t Words(size_t bytes) { return (bytes + sizeof(uint64_t) - 1) / sizeof(uint64_t); }

}  // namespace

NotifyBuffers::NotifyBuffers() {
  struct seccomp_notif_sizes sizes;
  memset(&sizes, 0, sizeof sizes);
  notif_bytes_ = sizeof(struct seccomp_notif);
  resp_bytes_ = sizeof(struct seccomp_notif_resp);
  if (syscall(SYS_seccomp, SECCOMP_GET_NOTIF_SIZES, 0, &sizes) == 0) {
    if (sizes.seccomp_notif > notif_bytes_) notif_bytes_ = sizes.seccomp_notif;
    if (sizes.seccomp_notif_resp > resp_bytes_) resp_bytes_ = sizes.seccomp_notif_resp;
  }
  notif_.assign(Words(notif_bytes_), 0);
  resp_.assign(Words(resp_bytes_), 0);
}

bool NotifyRecv(int fd, NotifyBuffers* buffers) {
  // The kernel refuses a RECV buffer that is not all zeroes (EINVAL).
  memset(buffers->notif_.data(), 0, buffers->notif_bytes_);
  return ioctl(fd, SECCOMP_IOCTL_NOTIF_RECV, buffers->notif_.data()) == 0;
}

bool NotifySendErrno(int fd, uint64_t id, int err, int* send_err) {
  struct seccomp_notif_resp resp;
  memset(&resp, 0, sizeof resp);
  resp.id = id;
  resp.error = -err;
  if (ioctl(fd, SECCOMP_IOCTL_NOTIF_SEND, &resp) == 0) return true;
  *send_err = errno;
  return false;
}

bool NotifyIdValid(int fd, uint64_t id) {
  __u64 value = id;
  for (;;) {
    if (ioctl(fd, SECCOMP_IOCTL_NOTIF_ID_VALID, &value) == 0) return true;
    if (errno != EINTR) return false;
  }
}

bool NotifySetSyncWakeUp(int fd, bool on) {
  const unsigned long flags = on ? SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP : 0;
  return ioctl(fd, SECCOMP_IOCTL_NOTIF_SET_FLAGS, flags) == 0;
}

bool IsSeccompNotifyFd(int fd) {
  // The device of anon_inodefs, read once from an eventfd of our own (0: none could be made).
  static const dev_t anon_dev = [] {
    struct stat st;
    const int probe = eventfd(0, EFD_CLOEXEC);
    const bool ok = probe >= 0 && fstat(probe, &st) == 0;
    if (probe >= 0) close(probe);
    return ok ? st.st_dev : dev_t(0);
  }();
  struct stat st;
  if (anon_dev == 0 || fstat(fd, &st) != 0 || st.st_dev != anon_dev) return false;
  __u64 id = 0;
  while (ioctl(fd, SECCOMP_IOCTL_NOTIF_ID_VALID, &id) != 0) {
    if (errno != EINTR) return errno == ENOENT;
  }
  return false;  // id 0 valid: not how any notify fd answers
}

}  // namespace seccomp_agent
