// The replay book's memory (docs/emulation.md, "Exactly once"): what the emulation helpers did for
// calls a signal may restart, kept in a memfd that outlives any one helper and any one data plane
// (the fd store keeps it as "replays", a handoff passes it on). The data plane creates it and
// gives each mount namespace's helper one partition (the header's keys); the helpers alone write
// the entries, each under an OFD write lock on its partition's bytes, held for a whole request (and
// the requests that follow it within the helper's busy poll): so
// a restarted call never overtakes the request it restarts, even when they are served by two
// helper processes (the old one still finishing after its data plane died, and the successor's).
//
// Layout (little endian, version 1): a header, then kPartitions partitions of kEntries entries.
// An entry's `state` has four values (the word was "delivered", 0 or 1, until the intent and acted
// states came, in the same 136 bytes and before any release shipped a book: still version 1).
#pragma once
#include <stddef.h>
#include <stdint.h>
#include <string.h>

namespace replay_book {

constexpr char kMagic[8] = {'S', 'C', 'A', 'R', 'P', 'L', 'Y', '1'};
constexpr uint32_t kVersion = 1;
constexpr uint32_t kPartitions = 64;  // the pool's bound on kept helpers
constexpr uint32_t kEntries = 32;     // per partition: one mount namespace's tasks

// The helper finds the book's memfd as this fd, and its partition in --book-partition=N.
constexpr int kBookFd = 5;  // after the socket (3) and the reply ring (4): nshelper_protocol.h

struct Header {
  char magic[8];
  uint32_t version;
  uint32_t partitions;
  uint32_t entries;
  uint32_t reserved;
  uint64_t keys[kPartitions];     // the mount namespace inode a partition serves; 0: free
  uint64_t used_ns[kPartitions];  // CLOCK_MONOTONIC of its last assignment (the least recent goes)
};

// Where an entry's request stands. The last two are written by a helper while it acts; a later
// lock holder sees them only when that helper died in the middle (docs/emulation.md, "Exactly once").
enum State : uint32_t {
  kAbandoned = 0,  // acted, and the answer found the target gone from its wait: a restart will come
  kDelivered = 1,  // acted, and the answer was taken (kept briefly: it may still be dropped)
  kIntent = 2,     // about to act: `intent` says what recovery compares with
  kActed = 3,      // acted, not answered yet: `made` (mkdir) says what it made
};

struct Entry {
  uint32_t used;
  uint32_t state;      // State
  uint64_t noted_ns;   // CLOCK_MONOTONIC (one clock for every process of the node)
  int32_t pid;
  uint16_t op;
  uint16_t pad0;
  uint32_t nr;
  uint32_t arch;
  uint64_t args[6];
  int32_t dirfd;
  uint32_t mode;
  uint64_t mount_flags;
  uint32_t flags;
  uint32_t pad1;
  uint64_t strings_hash;  // FNV-1a over the request's strings, each with its length
  uint64_t task_ino;      // pidfs inode of the task: unique for the life of the node
  union {
    struct {
      uint64_t dev;  // mkdir: the directory made (kActed, kAbandoned, kDelivered)
      uint64_t ino;
    } made;
    struct {
      uint64_t realtime_ns;  // mkdir: CLOCK_REALTIME_COARSE before acting (file times come from it)
      uint64_t mnt_id;       // mount: the unique mount id at the target before mounting
    } intent;                // kIntent
  };
};

static_assert(sizeof(Entry) == 136, "replay book entries are the format's");

constexpr size_t PartitionBytes() { return sizeof(Entry) * kEntries; }
constexpr size_t PartitionOffset(uint32_t partition) { return sizeof(Header) + PartitionBytes() * partition; }
constexpr size_t FileBytes() { return PartitionOffset(kPartitions); }

inline bool HeaderValid(const Header* h) {
  return memcmp(h->magic, kMagic, sizeof kMagic) == 0 && h->version == kVersion && h->partitions == kPartitions &&
         h->entries == kEntries;
}

inline void FillHeader(Header* h) {
  memcpy(h->magic, kMagic, sizeof kMagic);
  h->version = kVersion;
  h->partitions = kPartitions;
  h->entries = kEntries;
}

}  // namespace replay_book
