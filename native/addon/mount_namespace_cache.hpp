// Which mount namespace a container's task was in when it first asked for an emulation: the key
// of its helper (nshelper_pool.hpp) and of its replay book partition, kept per (container, pid)
// so that a burst of mkdirs pays one readlink of /proc/<pid>/ns/mnt, not one each (4 µs on an
// SRSO-mitigated VM, on every emulated call's path).
//
// Why a kept key is safe: the helper never acts in the namespace it is keyed by. It resolves
// through /proc/<pid>/root, the task's root in its mount tree now, so a task that moved to another
// namespace (or a reused pid) still gets its own filesystem; the key only picks which helper
// carries the request and which partition notes it. Kept, it stays the same for the call a signal
// restarts, which must find the original's note in the same partition: a key read afresh each
// time could differ between the two for a task that moved. An entry goes when its container is
// forgotten, or when 256 newer (container, pid) pairs pushed it out.
#pragma once
#include <stdint.h>
#include <sys/types.h>

#include <mutex>

namespace seccomp_agent {

class MountNamespaceCache {
 public:
  static constexpr size_t kEntries = 256;

  // The key kept for (owner, pid), or 0. Any thread.
  uint64_t Find(uint64_t owner, pid_t pid) {
    std::lock_guard<std::mutex> lock(mutex_);
    return FindLocked(owner, pid);
  }

  // Keeps `key` for (owner, pid), in place of the oldest entry. Any thread. Owner 0 (a caller
  // that names no container) and key 0 (the task was gone) are not kept.
  void Keep(uint64_t owner, pid_t pid, uint64_t key) {
    if (owner == 0 || key == 0) return;
    std::lock_guard<std::mutex> lock(mutex_);
    if (FindLocked(owner, pid) != 0) return;  // another thread kept it first
    entries_[next_] = Entry{owner, pid, key};
    next_ = (next_ + 1) % kEntries;
  }

  // The container `owner` is gone: its tasks' keys go with it. Any thread.
  void Forget(uint64_t owner) {
    std::lock_guard<std::mutex> lock(mutex_);
    for (Entry& e : entries_) {
      if (e.owner == owner) e = Entry{};
    }
  }

 private:
  uint64_t FindLocked(uint64_t owner, pid_t pid) const {
    for (const Entry& e : entries_) {
      if (e.owner == owner && e.pid == pid && e.key != 0) return e.key;
    }
    return 0;
  }

  struct Entry {
    uint64_t owner = 0;
    pid_t pid = 0;
    uint64_t key = 0;
  };
  std::mutex mutex_;
  Entry entries_[kEntries];
  size_t next_ = 0;
};

}  // namespace seccomp_agent
