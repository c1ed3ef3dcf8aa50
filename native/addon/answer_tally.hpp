// Counts of the answers the engine thread gives by itself (default action, fast-path rule) while
// nobody watches them one by one: instead of an 'answered' event per notification, one 'tally'
// event per (container, syscall, who answered, target gone) per batch, with the count and the
// answer latencies as histogram buckets. JS adds them to the same counters and metric an event
// would have fed (DataPlane.onTally); at 150k answers/s that is the difference between the JS
// thread converting 150k records a second and a few dozen (docs/benchmarks.md, "Tally").
// Engine thread only: no lock. Pure C++ (no N-API).
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "event.hpp"

namespace seccomp_agent {

// Upper bounds (ns) of the latency buckets: those of seccomp_agent_decision_latency_seconds, which
// JS builds from this list (the module's latencyBucketsNs export), so both sides agree.
constexpr uint64_t kLatencyBucketBoundsNs[] = {10000,   25000,   50000,    100000,    250000,     500000,
                                               1000000, 2500000, 10000000, 100000000, 1000000000, 5000000000};
constexpr size_t kLatencyBuckets = sizeof kLatencyBucketBoundsNs / sizeof kLatencyBucketBoundsNs[0];

// The index of the first bucket whose bound is >= latency_ns; kLatencyBuckets: above them all (+Inf).
size_t LatencyBucket(uint64_t latency_ns);

class AnswerTally {
 public:
  struct Key {
    uint32_t handle = 0;
    uint32_t nr = 0;
    uint32_t arch = 0;
    AnsweredBy by = AnsweredBy::kNoControlPlane;
    bool gone = false;
    bool operator==(const Key& o) const {
      return handle == o.handle && nr == o.nr && arch == o.arch && by == o.by && gone == o.gone;
    }
  };
  struct Entry {
    Key key;
    uint64_t count = 0;
    uint64_t latency_sum_ns = 0;
    // buckets[i]: latencies in (bound[i-1], bound[i]]; what is above the last bound is count - sum.
    uint32_t buckets[kLatencyBuckets] = {};
  };
  // Distinct keys kept at most: bounds the table (and the events one drain queues).
  static constexpr size_t kMaxEntries = 256;

  // One answer, at `now_ns`. False (nothing counted) when its key is new and the table is full.
  bool Add(const Key& key, uint64_t latency_ns, uint64_t now_ns);
  bool empty() const { return entries_.empty(); }
  // When the first answer of what is held now was added (UINT64_MAX when empty).
  uint64_t first_ns() const { return first_ns_; }
  const std::vector<Entry>& entries() const { return entries_; }
  void Clear();
  // Could not be drained (the event queue is full): try again a batch delay from `now_ns`.
  void Postpone(uint64_t now_ns) { first_ns_ = now_ns; }

 private:
  std::vector<Entry> entries_;
  size_t last_ = 0;  // the entry the previous Add hit: a busy container hits it again
  uint64_t first_ns_ = UINT64_MAX;
};

}  // namespace seccomp_agent
