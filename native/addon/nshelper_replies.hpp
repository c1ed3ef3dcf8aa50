// The pool's end of one helper's reply ring (nshelper_protocol.h): a memfd the pool creates and
// maps, given to the helper at kRepliesFd, from which the pool thread takes responses in order.
#pragma once
#include "nshelper_protocol.h"

namespace seccomp_agent {

class NsHelperReplies {
 public:
  NsHelperReplies() = default;
  NsHelperReplies(const NsHelperReplies&) = delete;
  NsHelperReplies& operator=(const NsHelperReplies&) = delete;
  ~NsHelperReplies();

  // Creates and maps a ring; *child_fd is a close-on-exec descriptor of it above kBookFd (for
  // posix_spawn to put at kRepliesFd; the caller closes it). False with *err.
  bool Create(int* child_fd, int* err);
  // The next response posted, if any: copied out, its slot given back.
  bool Take(nshelper::Response* out);
  // More posted than the ring holds: the helper is out of step (it never does this itself).
  bool Overrun() const;

 private:
  nshelper::ReplyRing* ring_ = nullptr;
};

}  // namespace seccomp_agent
