// The pool's end of a helper's requests (nshelper_requests.hpp).
#include "nshelper_requests.hpp"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>

#include <string>

namespace seccomp_agent {

bool SendNsHelperRequest(int sock, const NsHelperJob& job, uint64_t tag) {
  nshelper::Request header = job.header;
  header.magic = nshelper::kMagic;
  header.version = nshelper::kVersion;
  header.tag = tag;
  for (int i = 0; i < 4; ++i) header.len[i] = uint32_t(job.strings[i].size());
  std::string message(reinterpret_cast<const char*>(&header), sizeof(header));
  for (int i = 0; i < 4; ++i) message.append(job.strings[i]);

  iovec iov = {&message[0], message.size()};
  msghdr msg = {};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))];
  if (job.notify_fd >= 0) {
    msg.msg_control = control;
    msg.msg_controllen = sizeof(control);
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(c), &job.notify_fd, sizeof(int));
  }
  ssize_t w;
  do {
    w = sendmsg(sock, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
  } while (w < 0 && errno == EINTR);
  return w >= 0;
}

}  // namespace seccomp_agent
