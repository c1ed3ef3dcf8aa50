// Where the kernel wakes a container's caller once its notification is answered: on the answering
// thread's CPU (SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP, set on every notify fd as it comes in), or
// wherever the scheduler likes ("spread").
//
// Sync is right for a container with a caller or two: the caller and the lane take turns on one
// CPU, with no wake-up of an idle CPU (on this 2-vCPU VM a lone caller's round trip is 6 µs sync,
// 47 µs spread). It is wrong for a container with many callers at once: every woken caller runs
// on the lane's CPU, between the lane's answers, while the other CPUs wait; spread, the others
// run them. Measured with the bare C responder on 2 vCPUs (docs/benchmarks.md, stop 38): 3
// callers, sync ahead (135k against 77k–113k calls/s); 4 callers, spread ahead (129k–180k against
// 127k–130k); 8 callers, spread 15–30% ahead.
//
// But sync is also what keeps a flooding container's callers on its lane's CPU: spread, they run
// on every CPU, and another container's calls wait behind them (the noisy-neighbour rows: the
// victim's p99 from 9 µs to 33–50 µs). So a container is spread only while it is alone: no other
// container served by this data plane received a notification in the last kAloneNs.
//
// Each container's lane looks at its last kWindow notifications: when they came in within
// kBusyWindowNs (a busy container) from at least SpreadAt(cpus) distinct threads, and it is alone,
// kLooksToSwitch looks in a row, its callers are spread. They go back to sync after kLooksToSwitch
// windows that were slower or saw another container call, or kLooksFewToSync windows with at
// most half as many callers (spread, two or three callers can take every turn of a window while
// the others wait for a CPU: measured, such windows came in pairs every few ms and flipped the mode
// back and forth). Only the mode is at stake, never an answer: a wrong guess costs time.
// Header-only; one per container, touched only by the lane serving it.
#pragma once
#include <sched.h>
#include <stdint.h>

namespace seccomp_agent {

class WakeModeAdvisor {
 public:
  enum class Mode : uint8_t { kSync, kSpread };
  static constexpr uint32_t kWindow = 32;
  static constexpr uint64_t kBusyWindowNs = 640000;  // 32 notifications in 640 µs: 50,000 a second
  static constexpr uint32_t kLooksToSwitch = 2;
  static constexpr uint32_t kLooksFewToSync = 16;
  static constexpr uint64_t kAloneNs = 1000000000;  // no other container's notification for 1 s

  // The distinct callers in one busy window from which they are spread: twice the CPUs this
  // process may run on (the crossover measured on 2), 0 (never) where that exceeds a window.
  static uint32_t SpreadAt(uint32_t cpus) { return cpus != 0 && 2 * cpus <= kWindow ? 2 * cpus : 0; }

  // The CPUs this process may run on (its affinity mask), 0 when it cannot be read.
  static uint32_t UsableCpus() {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) != 0) return 0;
    return static_cast<uint32_t>(CPU_COUNT(&set));
  }

  // Its lane, per notification received: `tid` its caller, `now_ns` when received. True when it
  // completes a window: Decide then.
  bool Add(uint32_t tid, uint64_t now_ns) {
    if (count_ == 0) window_start_ns_ = now_ns;
    tids_[count_++] = tid;
    if (count_ < kWindow) return false;
    count_ = 0;
    window_end_ns_ = now_ns;
    return true;
  }

  // Its lane, at the end of a window: `alone` when no other container called in kAloneNs. True
  // with *change set when the container's mode should change now (then Set once it did).
  bool Decide(uint32_t spread_at, bool alone, Mode* change) {
    if (spread_at == 0) return false;
    const bool busy = window_end_ns_ >= window_start_ns_ && window_end_ns_ - window_start_ns_ <= kBusyWindowNs;
    const bool counted = busy && alone;  // else it goes back to sync, or stays
    const uint32_t callers = counted ? DistinctCallers() : 0;
    Mode wanted = mode_;
    if (callers >= spread_at) {
      wanted = Mode::kSpread;
    } else if (callers <= spread_at / 2) {
      wanted = Mode::kSync;
    }
    if (wanted == mode_) {
      looks_ = 0;
      hasty_looks_ = 0;
      return false;
    }
    looks_++;
    hasty_looks_ = counted ? 0 : hasty_looks_ + 1;
    // Spread, a few callers can take every turn of a window while the others wait to run: few
    // distinct callers bring it back only after kLooksFewToSync windows; a slow window, or
    // another container's call, after kLooksToSwitch.
    const bool due = mode_ == Mode::kSpread && hasty_looks_ < kLooksToSwitch ? looks_ >= kLooksFewToSync
                                                                           : looks_ >= kLooksToSwitch;
    if (!due) return false;
    looks_ = 0;
    hasty_looks_ = 0;
    *change = wanted;
    return true;
  }

  void Set(Mode mode) { mode_ = mode; }
  Mode mode() const { return mode_; }
  // Sync with nothing counted, as a new container's: its fd was set sync behind its back.
  void Restart() { *this = WakeModeAdvisor(); }

 private:
  uint32_t DistinctCallers() const {
    uint32_t distinct = 0;
    for (uint32_t i = 0; i < kWindow; i++) {
      uint32_t j = 0;
      while (j < i && tids_[j] != tids_[i]) j++;
      if (j == i) distinct++;
    }
    return distinct;
  }

  uint32_t tids_[kWindow] = {};
  uint32_t count_ = 0;
  uint64_t window_start_ns_ = 0;
  uint64_t window_end_ns_ = 0;
  Mode mode_ = Mode::kSync;
  uint32_t looks_ = 0;        // windows in a row that wanted the other mode
  uint32_t hasty_looks_ = 0;  // ... of them, the last ones in a row slow or not alone
};

}  // namespace seccomp_agent
