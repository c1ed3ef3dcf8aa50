#include "answer_tally.hpp"

namespace seccomp_agent {

size_t LatencyBucket(uint64_t latency_ns) {
  size_t i = 0;
  while (i < kLatencyBuckets && latency_ns > kLatencyBucketBoundsNs[i]) i++;
  return i;
}

bool AnswerTally::Add(const Key& key, uint64_t latency_ns, uint64_t now_ns) {
  Entry* entry = nullptr;
  if (last_ < entries_.size() && entries_[last_].key == key) {
    entry = &entries_[last_];
  } else {
    for (size_t i = 0; i < entries_.size(); i++) {
      if (entries_[i].key == key) {
        entry = &entries_[i];
        last_ = i;
        break;
      }
    }
    if (entry == nullptr) {
      if (entries_.size() >= kMaxEntries) return false;
      if (entries_.empty()) {
        entries_.reserve(kMaxEntries);
        first_ns_ = now_ns;
      }
      last_ = entries_.size();
      entries_.emplace_back();
      entry = &entries_.back();
      entry->key = key;
    }
  }
  entry->count++;
  entry->latency_sum_ns += latency_ns;
  const size_t bucket = LatencyBucket(latency_ns);
  if (bucket < kLatencyBuckets) entry->buckets[bucket]++;
  return true;
}

void AnswerTally::Clear() {
  entries_.clear();
  last_ = 0;
  first_ns_ = UINT64_MAX;
}

}  // namespace seccomp_agent
