// The pool's end of a helper's reply ring (nshelper_replies.hpp).
#include "nshelper_replies.hpp"

#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "replay_book.h"

namespace seccomp_agent {

NsHelperReplies::~NsHelperReplies() {
  if (ring_ != nullptr) munmap(ring_, sizeof(nshelper::ReplyRing));
}

bool NsHelperReplies::Create(int* child_fd, int* err) {
  const int fd = memfd_create("seccomp-nshelper-replies", MFD_CLOEXEC);
  if (fd < 0) {
    *err = errno;
    return false;
  }
  void* base = MAP_FAILED;
  if (ftruncate(fd, sizeof(nshelper::ReplyRing)) == 0) {
    base = mmap(nullptr, sizeof(nshelper::ReplyRing), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  }
  // Above every fd posix_spawn sets in the child, so that no dup2 there overwrites it first.
  const int high = base == MAP_FAILED ? -1 : fcntl(fd, F_DUPFD_CLOEXEC, replay_book::kBookFd + 1);
  const int saved = errno;
  close(fd);
  if (high < 0) {
    if (base != MAP_FAILED) munmap(base, sizeof(nshelper::ReplyRing));
    *err = saved;
    return false;
  }
  ring_ = static_cast<nshelper::ReplyRing*>(base);  // zero-filled: head == tail == 0
  *child_fd = high;
  return true;
}

bool NsHelperReplies::Take(nshelper::Response* out) {
  if (ring_ == nullptr) return false;
  const uint32_t tail = ring_->tail.load(std::memory_order_relaxed);
  if (ring_->head.load(std::memory_order_acquire) == tail) return false;
  *out = ring_->slots[tail % nshelper::kReplySlots];
  ring_->tail.store(tail + 1, std::memory_order_release);
  return true;
}

bool NsHelperReplies::Overrun() const {
  if (ring_ == nullptr) return false;
  return ring_->head.load(std::memory_order_acquire) - ring_->tail.load(std::memory_order_relaxed) > nshelper::kReplySlots;
}

}  // namespace seccomp_agent
