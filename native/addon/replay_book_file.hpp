// The data plane's side of the replay book (native/common/replay_book.h): the memfd, made here or
// taken back from a predecessor, and which partition each mount namespace's helper writes to. The
// helpers write the entries; this side writes only the header's keys (the pool thread, one
// writer), so a successor gives a namespace's new helper the partition its old one wrote.
#pragma once
#include <stdint.h>

#include <memory>
#include <mutex>
#include <set>
#include <string>

#include "replay_book.h"

namespace seccomp_agent {

class ReplayBookFile {
 public:
  // A new, empty book in a new memfd. nullptr with *error.
  static std::unique_ptr<ReplayBookFile> Create(std::string* error);
  // A predecessor's book (takes fd). nullptr with *error (fd closed) when it is not one.
  static std::unique_ptr<ReplayBookFile> Open(int fd, std::string* error);
  ~ReplayBookFile();
  ReplayBookFile(const ReplayBookFile&) = delete;
  ReplayBookFile& operator=(const ReplayBookFile&) = delete;

  int fd() const { return fd_; }
  // Pool thread. The partition of mount namespace `key`: the one it had, else a free one, else
  // the least recently assigned one that no live helper (`busy`) writes, emptied. -1: none.
  int Assign(uint64_t key, const std::set<int>& busy, uint64_t now_ns);

 private:
  ReplayBookFile(int fd, void* base) : fd_(fd), base_(base) {}
  replay_book::Header* header() { return static_cast<replay_book::Header*>(base_); }

  int fd_;
  void* base_;
  std::mutex mu_;  // pools of one process (tests make several engines)
};

}  // namespace seccomp_agent
