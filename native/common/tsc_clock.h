// The notification path's clock: CLOCK_MONOTONIC in ns, read with rdtsc (about 10 ns here)
// instead of through the vDSO (about 25 ns: it reads the TSC too, then a seqlock and the kernel's
// conversion). The engine reads the clock twice per notification (receipt, answer); the vDSO's
// reads were a sixth of its user time on the default path (docs/benchmarks.md, stop 37).
//
// It stays CLOCK_MONOTONIC, not a clock of its own: every kAnchorNs it reads the real clock
// again, anchors there, and takes the TSC's rate from the interval just ended. Between anchors it
// can differ from MonotonicNs() by NTP's slew over one interval (at most 500 ppm × 2 ms = 1 µs)
// plus a read's jitter, and at an anchor it may step back by as much: the difference of two of
// its readings is taken with Elapsed (never negative). Deadlines it is compared with are ms.
//
// Used only where the kernel's own clocksource is an invariant TSC (TscClockUsable): elsewhere,
// or before its first 1 ms has given it a rate, Now() is MonotonicNs(). Not shared: one instance
// per thread (each engine lane has its own). Header-only.
#pragma once
#include <stdint.h>

#include <fstream>
#include <string>

#include "monotonic_clock.h"

#if defined(__x86_64__)
#include <x86intrin.h>
#endif

namespace seccomp_agent {

// True where rdtsc reads what CLOCK_MONOTONIC reads: the kernel's clocksource is "tsc" and the
// CPU says its TSC runs at a constant rate through frequency changes and idle states. Read once;
// false where either file cannot be read (a data plane without /sys).
inline bool TscClockUsable() {
#if defined(__x86_64__)
  static const bool usable = [] {
    std::ifstream source("/sys/devices/system/clocksource/clocksource0/current_clocksource");
    std::string line;
    if (!std::getline(source, line) || line != "tsc") return false;
    std::ifstream cpuinfo("/proc/cpuinfo");
    while (std::getline(cpuinfo, line)) {
      if (line.compare(0, 5, "flags") != 0) continue;
      line += ' ';
      return line.find(" constant_tsc ") != std::string::npos && line.find(" nonstop_tsc ") != std::string::npos;
    }
    return false;
  }();
  return usable;
#else
  return false;
#endif
}

// `Source` gives Ticks() (the TSC) and Ns() (CLOCK_MONOTONIC): the hardware below, a fake in tests.
template <typename Source>
class BasicTscClock {
 public:
  static constexpr uint64_t kAnchorNs = 2000000;       // how long one anchor is used
  static constexpr uint64_t kCalibrationNs = 1000000;  // the shortest interval a rate is taken from
  // A (ticks, ns) pair whose two tick reads are further apart than this was interrupted between
  // them: not used (the rate it gives could be off by the interruption).
  static constexpr uint64_t kMaxPairTicks = 20000;

  explicit BasicTscClock(bool usable) : usable_(usable) {}

  uint64_t Now() {
    if (!usable_) return Source::Ns();
    const uint64_t ticks = Source::Ticks() - anchor_ticks_;  // wraps to huge if the TSC went back
    if (ticks >= anchor_for_ticks_) return Anchor();
    return anchor_ns_ + static_cast<uint64_t>((static_cast<unsigned __int128>(ticks) * mult_) >> kShift);
  }

  bool calibrated() const { return anchor_for_ticks_ != 0; }

 private:
  static constexpr int kShift = 32;  // mult_ is ns per tick in 32.32 fixed point

  // Reads the real clock; anchors there when it has a rate (or can now take one), else keeps the
  // first anchor as the base its rate will be taken from.
  uint64_t Anchor() {
    const uint64_t before = Source::Ticks();
    const uint64_t ns = Source::Ns();
    const uint64_t after = Source::Ticks();
    if (after < before || after - before > kMaxPairTicks) return ns;  // interrupted: next call tries again
    const uint64_t ticks = before + (after - before) / 2;
    if (anchor_ns_ == 0 || ticks <= anchor_ticks_ || ns <= anchor_ns_) {
      Rebase(ticks, ns);  // the first reading, or the TSC or clock went back (a migrated VM): start over
      return ns;
    }
    const uint64_t dn = ns - anchor_ns_;
    const uint64_t dt = ticks - anchor_ticks_;
    if (dn < kCalibrationNs) {
      if (calibrated()) Rebase(ticks, ns);  // cannot happen with a steady TSC; distrust the rate
      return ns;
    }
    const unsigned __int128 mult = (static_cast<unsigned __int128>(dn) << kShift) / dt;
    const unsigned __int128 anchor_for = static_cast<unsigned __int128>(kAnchorNs) * dt / dn;
    // A TSC between 10 MHz and 100 GHz, or the readings are not to be trusted.
    if (mult < (static_cast<unsigned __int128>(1) << kShift) / 100 || mult > (static_cast<unsigned __int128>(100) << kShift)) {
      Rebase(ticks, ns);
      return ns;
    }
    mult_ = static_cast<uint64_t>(mult);
    anchor_for_ticks_ = static_cast<uint64_t>(anchor_for);
    anchor_ticks_ = ticks;
    anchor_ns_ = ns;
    return ns;
  }

  void Rebase(uint64_t ticks, uint64_t ns) {
    anchor_ticks_ = ticks;
    anchor_ns_ = ns;
    anchor_for_ticks_ = 0;  // uncalibrated: every Now() reads the real clock until a rate is taken
  }

  const bool usable_;
  uint64_t anchor_ticks_ = 0;
  uint64_t anchor_ns_ = 0;
  uint64_t mult_ = 0;
  uint64_t anchor_for_ticks_ = 0;  // 0: no rate yet
};

struct HardwareClock {
#if defined(__x86_64__)
  static uint64_t Ticks() { return __rdtsc(); }
#else
  static uint64_t Ticks() { return 0; }  // never read: TscClockUsable() is false
#endif
  static uint64_t Ns() { return MonotonicNs(); }
};

using TscClock = BasicTscClock<HardwareClock>;

}  // namespace seccomp_agent
