#include "nshelper_replay.hpp"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace nshelper {

bool ReplayBook::Open(uint32_t partition, uint64_t intent_keep_ns) {
  using namespace replay_book;
  if (partition >= kPartitions) {
    errno = EINVAL;
    return false;
  }
  struct stat st;
  if (fstat(kBookFd, &st) != 0) return false;
  if (static_cast<size_t>(st.st_size) != FileBytes()) {
    errno = EINVAL;
    return false;
  }
  void* base = mmap(nullptr, FileBytes(), PROT_READ | PROT_WRITE, MAP_SHARED, kBookFd, 0);
  if (base == MAP_FAILED) return false;
  if (!HeaderValid(static_cast<const Header*>(base))) {
    munmap(base, FileBytes());
    errno = EINVAL;
    return false;
  }
  // An open file description of our own: the data plane's copy, the keeper's and another
  // helper's are other ones, so the lock below is held against all of them, and dies with us.
  char self[32];
  snprintf(self, sizeof self, "/proc/self/fd/%d", kBookFd);
  lock_.Reset(open(self, O_RDWR | O_CLOEXEC));
  if (lock_.get() < 0) {
    munmap(base, FileBytes());
    return false;
  }
  close(kBookFd);
  entries_ = reinterpret_cast<Entry*>(static_cast<char*>(base) + PartitionOffset(partition));
  lock_start_ = PartitionOffset(partition);
  intent_keep_ns_ = intent_keep_ns;
  return true;
}

// The partition's bytes, write-locked (F_WRLCK, waiting) or unlocked (F_UNLCK).
void ReplayBook::SetLock(short type) {
  if (!enabled()) return;
  struct flock lock = {};
  lock.l_type = type;
  lock.l_whence = SEEK_SET;
  lock.l_start = off_t(lock_start_);
  lock.l_len = off_t(replay_book::PartitionBytes());
  while (fcntl(lock_.get(), type == F_UNLCK ? F_OFD_SETLK : F_OFD_SETLKW, &lock) != 0 && errno == EINTR) {
  }
}

uint64_t ReplayBook::Hash(const std::string* strings) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  auto mix = [&h](const void* data, size_t n) {
    const unsigned char* p = static_cast<const unsigned char*>(data);
    for (size_t i = 0; i < n; i++) {
      h ^= p[i];
      h *= 1099511628211ull;
    }
  };
  for (int i = 0; i < 4; ++i) {
    const uint64_t len = strings[i].size();
    mix(&len, sizeof len);
    mix(strings[i].data(), strings[i].size());
  }
  return h;
}

bool ReplayBook::Matches(const replay_book::Entry& e, const Request& req, uint64_t strings_hash, uint64_t task_ino) {
  return e.used && e.pid == req.pid && e.task_ino == task_ino && e.op == req.op && e.nr == req.nr && e.arch == req.arch &&
         e.dirfd == req.dirfd && e.mode == req.mode && e.mount_flags == req.mount_flags &&
         (e.flags & kRequireCapSysAdmin) == (req.flags & kRequireCapSysAdmin) && e.strings_hash == strings_hash &&
         memcmp(e.args, req.args, sizeof req.args) == 0;
}

uint64_t ReplayBook::KeepNs(const replay_book::Entry& e) const {
  switch (e.state) {
    case replay_book::kDelivered: return kDeliveredKeepNs;
    case replay_book::kIntent:
    case replay_book::kActed: return intent_keep_ns_;
    default: return kKeepNs;
  }
}

Candidate ReplayBook::Find(const Request& req, uint64_t strings_hash, uint64_t task_ino, uint64_t now_ns) {
  Candidate c;
  if (!enabled() || task_ino == 0) return c;
  for (uint32_t i = 0; i < replay_book::kEntries; i++) {
    const replay_book::Entry& e = entries_[i];
    if (!Matches(e, req, strings_hash, task_ino)) continue;
    if (now_ns - e.noted_ns > KeepNs(e)) {
      Erase(int(i));
      continue;
    }
    c.index = int(i);
    c.entry = e;
    return c;
  }
  return c;
}

replay_book::Entry* ReplayBook::PickSlot(const Request& req, uint64_t strings_hash, uint64_t task_ino, bool precaution,
                                         uint64_t now_ns) {
  replay_book::Entry* slot = nullptr;
  replay_book::Entry* oldest = nullptr;
  replay_book::Entry* oldest_of_task = nullptr;
  size_t of_task = 0;
  for (uint32_t i = 0; i < replay_book::kEntries; i++) {
    replay_book::Entry& e = entries_[i];
    // Expired, or the same call noted before (a repeat, or a restart of a restart): room.
    if (e.used && (now_ns - e.noted_ns > KeepNs(e) || Matches(e, req, strings_hash, task_ino))) Erase(int(i));
    if (!e.used) {
      if (slot == nullptr) slot = &e;
      continue;
    }
    // A precaution may take the place of delivered ones only; anything else of any (the delivered
    // first: those are a precaution, an abandoned one is a restart that will come).
    const bool delivered = e.state == replay_book::kDelivered;
    if (precaution && !delivered) continue;
    const bool older = oldest == nullptr || (delivered != (oldest->state == replay_book::kDelivered)
                                                 ? delivered
                                                 : e.noted_ns < oldest->noted_ns);
    if (older) oldest = &e;
    if (e.pid == req.pid && delivered == precaution) {
      of_task++;
      if (oldest_of_task == nullptr || e.noted_ns < oldest_of_task->noted_ns) oldest_of_task = &e;
    }
  }
  // A task has one call in flight, and a signal handler's own calls nest on top of it: a few
  // entries per task are all a restart can need. Past that, or when full, the oldest goes.
  if (of_task >= kPerTask) slot = oldest_of_task;
  return slot != nullptr ? slot : oldest;
}

int ReplayBook::Intend(const Request& req, uint64_t strings_hash, uint64_t task_ino, uint64_t realtime_ns,
                       uint64_t mnt_id, uint64_t now_ns) {
  if (!enabled() || task_ino == 0) return -1;
  // Most requests end delivered: room among the precautions first, else as an abandoned one would.
  replay_book::Entry* slot = PickSlot(req, strings_hash, task_ino, true, now_ns);
  if (slot == nullptr) slot = PickSlot(req, strings_hash, task_ino, false, now_ns);
  if (slot == nullptr) return -1;
  replay_book::Entry e = {};
  e.used = 1;
  e.state = replay_book::kIntent;
  e.noted_ns = now_ns;
  e.pid = req.pid;
  e.op = req.op;
  e.nr = req.nr;
  e.arch = req.arch;
  memcpy(e.args, req.args, sizeof e.args);
  e.dirfd = req.dirfd;
  e.mode = req.mode;
  e.mount_flags = req.mount_flags;
  e.flags = req.flags;
  e.strings_hash = strings_hash;
  e.task_ino = task_ino;
  e.intent.realtime_ns = realtime_ns;
  e.intent.mnt_id = mnt_id;
  *slot = e;
  return int(slot - entries_);
}

void ReplayBook::Acted(int index, uint64_t made_dev, uint64_t made_ino) {
  if (index < 0) return;
  replay_book::Entry& e = entries_[index];
  e.made.dev = made_dev;
  e.made.ino = made_ino;
  e.state = replay_book::kActed;
}

void ReplayBook::Settle(int index, bool delivered, uint64_t now_ns) {
  if (index < 0) return;
  entries_[index].state = delivered ? replay_book::kDelivered : replay_book::kAbandoned;
  entries_[index].noted_ns = now_ns;
}

void ReplayBook::Erase(int index) {
  if (index >= 0) entries_[index] = replay_book::Entry{};
}

size_t ReplayBook::size() const {
  size_t n = 0;
  for (uint32_t i = 0; enabled() && i < replay_book::kEntries; i++) n += entries_[i].used ? 1 : 0;
  return n;
}

}  // namespace nshelper
