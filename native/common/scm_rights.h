// One Unix-socket message with fds attached (SCM_RIGHTS), both ways: the runtime ingest, the
// handoff, the fd store protocol and the tools all pass fds, and all the same way. EINTR is retried;
// every other result is the caller's to judge.
#pragma once
#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <vector>

namespace scm_rights {

// The kernel's SCM_MAX_FD: the most fds one message may carry.
constexpr size_t kMaxFds = 253;

// sendmsg of `iov` with `count` (<= kMaxFds) fds, to `to` when given (an unconnected datagram
// socket); returns what sendmsg returned (errno kept).
inline ssize_t Send(int sock, const struct iovec* iov, size_t iov_count, const int* fds, size_t count, int flags,
                    const void* to = nullptr, socklen_t to_length = 0) {
  struct msghdr msg;
  memset(&msg, 0, sizeof msg);
  msg.msg_name = const_cast<void*>(to);
  msg.msg_namelen = to_length;
  msg.msg_iov = const_cast<struct iovec*>(iov);
  msg.msg_iovlen = iov_count;
  alignas(struct cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxFds)];
  if (count > 0) {
    if (count > kMaxFds) {
      errno = EINVAL;
      return -1;
    }
    memset(control, 0, CMSG_SPACE(sizeof(int) * count));
    msg.msg_control = control;
    msg.msg_controllen = CMSG_SPACE(sizeof(int) * count);
    struct cmsghdr* cmsg = CMSG_FIRSTHDR(&msg);
    cmsg->cmsg_level = SOL_SOCKET;
    cmsg->cmsg_type = SCM_RIGHTS;
    cmsg->cmsg_len = CMSG_LEN(sizeof(int) * count);
    memcpy(CMSG_DATA(cmsg), fds, sizeof(int) * count);
  }
  ssize_t sent;
  do {
    sent = sendmsg(sock, &msg, flags);
  } while (sent < 0 && errno == EINTR);
  return sent;
}

// recvmsg into `iov` with MSG_CMSG_CLOEXEC added to `flags`; appends every fd the message carried
// to *fds (the caller owns them, even when it refuses the message) and sets *truncated when data
// or fds were cut (MSG_TRUNC, MSG_CTRUNC). Returns what recvmsg returned (errno kept).
inline ssize_t Receive(int sock, struct iovec* iov, size_t iov_count, int flags, std::vector<int>* fds, bool* truncated) {
  alignas(struct cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxFds)];
  struct msghdr msg;
  memset(&msg, 0, sizeof msg);
  msg.msg_iov = iov;
  msg.msg_iovlen = iov_count;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  ssize_t n;
  do {
    n = recvmsg(sock, &msg, flags | MSG_CMSG_CLOEXEC);
  } while (n < 0 && errno == EINTR);
  *truncated = false;
  if (n < 0) return n;
  for (struct cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    const unsigned char* data = CMSG_DATA(c);
    for (size_t i = 0; i < count; i++) {
      int fd;
      memcpy(&fd, data + i * sizeof(int), sizeof(int));
      fds->push_back(fd);
    }
  }
  *truncated = (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) != 0;
  return n;
}

}  // namespace scm_rights
