// The one clock of the native code, read one way: CLOCK_MONOTONIC through the vDSO (never a
// syscall, so never one a seccomp filter sees: the workloads time intercepted calls with it), in
// ns or ms, any clock in ns, the difference of two readings, and the CLOCK_REALTIME deadline
// pthread_timedjoin_np wants. The engine lanes' faster reading of the same clock: tsc_clock.h.
// Any thread; header-only.
#pragma once
#include <stdint.h>
#include <time.h>

// `clock` in ns since its epoch.
inline uint64_t ClockNs(clockid_t clock) {
  struct timespec ts;
  clock_gettime(clock, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

// CLOCK_MONOTONIC in ns.
inline uint64_t MonotonicNs() { return ClockNs(CLOCK_MONOTONIC); }

// `later - earlier` of two readings, 0 if `later` is the earlier: a lane's TscClock (tsc_clock.h)
// may read up to a µs behind MonotonicNs(), and a latency is never negative.
inline uint64_t Elapsed(uint64_t earlier, uint64_t later) { return later > earlier ? later - earlier : 0; }

// CLOCK_MONOTONIC in ms. Signed: deadlines are subtracted from it (seccomp-keeper's time left).
inline int64_t MonotonicMs() { return static_cast<int64_t>(MonotonicNs() / 1000000u); }

// CLOCK_REALTIME `ms` from now: the deadline of pthread_timedjoin_np, which takes no other clock.
inline struct timespec RealtimeDeadline(long ms) {
  struct timespec deadline;
  clock_gettime(CLOCK_REALTIME, &deadline);
  deadline.tv_sec += ms / 1000;
  deadline.tv_nsec += (ms % 1000) * 1000000L;
  if (deadline.tv_nsec >= 1000000000L) {
    deadline.tv_sec++;
    deadline.tv_nsec -= 1000000000L;
  }
  return deadline;
}
