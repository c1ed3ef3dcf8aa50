// The helper pool's direct hand-off (nshelper_pool.hpp): a kept helper with room in its window is
// published as ready for its namespace, Submit sends a request for that namespace straight to it
// from the submitting thread, and the pool thread adopts what was sent that way, in order, before
// it next sends to, reads from, retires or reaps that helper.
#include <sys/timerfd.h>
#include <time.h>

#include "monotonic_clock.h"
#include "nshelper_pool.hpp"
#include "nshelper_requests.hpp"

namespace seccomp_agent {

// Under mutex_. True when `p` went to its namespace's ready helper (`p` is then moved from).
bool NsHelperPool::SendDirect(Pending& p) {
  auto it = ready_.find(p.key);
  if (it == ready_.end()) return false;
  const uint64_t tag = next_tag_++;
  const bool sent = SendNsHelperRequest(it->second.sock, p.job, tag);
  const uint64_t helper_id = it->second.helper_id;
  if (!sent || --it->second.room == 0) {
    ready_.erase(it);  // its window is full; or, when the send failed, it is the pool thread's
    ready_count_ = ready_.size();
  }
  if (!sent) return false;
  p.tag = tag;
  p.sent_ns = MonotonicNs();
  stat_direct_++;
  // Its timeout must be seen even if no answer or submission wakes the pool thread first.
  const uint64_t deadline = p.sent_ns + uint64_t(options_.request_timeout_ms) * 1000000ull;
  if (timer_armed_ns_ == 0 || deadline < timer_armed_ns_) {
    itimerspec when = {};
    when.it_value.tv_sec = time_t(deadline / 1000000000ull);
    when.it_value.tv_nsec = long(deadline % 1000000000ull);
    if (timerfd_settime(timer_, TFD_TIMER_ABSTIME, &when, nullptr) == 0) timer_armed_ns_ = deadline;
  }
  direct_sent_.push_back(DirectSent{helper_id, std::move(p)});
  return true;
}

// Pool thread. A kept helper with room in its window and no backlog may take its namespace's next
// requests directly: the pool thread sends to it only after Reclaim, so every request sent to a
// published helper is Submit's, and they are adopted in the order they were sent. Its room counts
// what Submit sent it that is not adopted yet (it may stay published while its answers are read).
void NsHelperPool::Publish(Helper* h) {
  if (options_.spawn_per_call) return;
  auto kept = kept_by_key_.find(h->key);
  const bool eligible = !h->retiring && h->sock >= 0 && h->backlog.empty() && kept != kept_by_key_.end() && kept->second == h;
  std::lock_guard<std::mutex> lock(mutex_);
  if (closed_) return;
  size_t sent = h->in_flight.size();
  for (const DirectSent& d : direct_sent_) sent += d.helper_id == h->id ? 1 : 0;
  if (eligible && sent < kWindow) {
    ready_[h->key] = Ready{h->id, h->sock, kWindow - sent};
  } else {
    auto it = ready_.find(h->key);
    if (it != ready_.end() && it->second.helper_id == h->id) ready_.erase(it);
  }
  ready_count_ = ready_.size();
}

// Pool thread, before it sends to, retires or forgets `h`: `h` is no longer ready, and what Submit
// sent it is in its in_flight, in the order sent (before anything sent after).
void NsHelperPool::Reclaim(Helper* h) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = ready_.find(h->key);
    if (it != ready_.end() && it->second.helper_id == h->id) {
      ready_.erase(it);
      ready_count_ = ready_.size();
    }
  }
  AdoptDirectSent(h);
}

// Pool thread, before it reads answers from `h`: what Submit sent it joins its in_flight, in the
// order sent; `h` stays ready meanwhile. Unpublished while its answers were read, a target that
// calls again the moment its helper answered it (a serial workload: every time) found no ready
// helper and went through this thread: a wake-up of this thread on its path (docs/benchmarks.md).
void NsHelperPool::AdoptDirectSent(Helper* h) {
  std::vector<DirectSent> mine;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto d = direct_sent_.begin(); d != direct_sent_.end();) {
      if (d->helper_id == h->id) {
        mine.push_back(std::move(*d));
        d = direct_sent_.erase(d);
      } else {
        ++d;
      }
    }
  }
  for (DirectSent& d : mine) Adopt(h, std::move(d.pending));
}

// Pool thread: a request Submit sent to `h` joins what `h` has in hand.
void NsHelperPool::Adopt(Helper* h, Pending p) {
  if (p.job.owner) h->owners.insert(p.job.owner);
  h->last_used_ns = p.sent_ns;
  h->in_flight.push_back(std::move(p));
}

}  // namespace seccomp_agent
