// An engine thread ("lane", engine_lanes.cpp) and the messages lanes send each other: what each
// lane alone touches (its epoll set, buffers, tally, timer) and its inbox. Engine (engine.hpp)
// owns the lanes; these are its types, apart so that engine.hpp stays the engine's interface.
#pragma once

#include <pthread.h>

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "answer_tally.hpp"
#include "epoll_source.hpp"
#include "event.hpp"
#include "notification.hpp"
#include "notify_fd.hpp"
#include "target_memory.hpp"
#include "tsc_clock.h"

namespace seccomp_agent {

class Engine;

// Room for a notification's path arguments as read (six strings).
constexpr size_t kLaneStringsBytes = 6 * kTargetPathMax;

// What one lane sends another (engine_lanes.cpp): a container that moves to lane 0 with the
// notification that needs a control plane or an executor (kVisit), one going home (kHome), or one
// whose fd is done (kRemove, to lane 0, which alone frees containers). A lane with a file table of
// its own is handed each container it is to serve (kAdopt), and forwards to lane 0 for good one
// whose fd it could not copy into that table (`rehome`; engine_fd_tables.cpp). And what a read that
// outlived the read watch sends once it returns (engine_read_watch.cpp): a notification whose lane
// got a new thread, for the lane to decide and to serve its container again (kResume); a
// predecessor's one, for lane 0 to decide, its container served where it is (kDecide, with its
// journal slot).
struct LaneHandover {
  enum class Kind : uint8_t { kVisit, kHome, kRemove, kResume, kDecide, kAdopt } kind = Kind::kVisit;
  uint32_t handle = 0;
  // kVisit: lane 0 applies the container's rules again (an emulation's: only lane 0 hands work to
  // the executors when other lanes have tables of their own); else it goes straight to asking.
  bool rules_again = false;
  // A lane with a table of its own could not copy the container's fd into it: lane 0 serves the
  // container from now on, its home (the handover otherwise taken as its kind says).
  bool rehome = false;
  uint32_t journal_slot = UINT32_MAX;  // kDecide: released once decided
  Notification notification;  // kVisit, kResume, kDecide: received, its path arguments in `strings` as read
  Event event;
  std::string strings;
};

// One thread that receives and answers, and what only it touches. Lane 0 is the engine thread
// (Run: sessions, the channel, deadlines, removals, handoff); the others (RunLane) receive from
// the containers that live on them and answer what needs nobody else: the container's rules, the
// default while no control plane is attached or awaited. A container that needs one moves to
// lane 0 with that notification, and goes home once it has answered natively for a while.
struct EngineLane {
  Engine* engine = nullptr;
  size_t index = 0;
  int epoll_fd = -1;
  int wake_fd = -1;
  EpollSource wake_source{EpollSource::Kind::kWake};
  // Its timers (event batch, tally; lane 0: deadlines too) as one timerfd in its epoll set, armed
  // only when the next wake-up moves earlier: the wait itself then has no timeout, so a
  // notification costs no hrtimer set-up and tear-down per wait, as it did with epoll_pwait2's.
  int timer_fd = -1;
  EpollSource timer_source{EpollSource::Kind::kTimer};
  // When timer_fd fires (UINT64_MAX: disarmed). Written by the lane; an executor reads lane 0's
  // to know whether the engine will wake for the batch it just added to (OnEmulated).
  std::atomic<uint64_t> timer_armed_ns{UINT64_MAX};
  pthread_t thread{};
  bool started = false;
  // Lanes 1.. (engine_fd_tables.cpp): the file table its thread serves with, a token of its own
  // (0: the process's shared one). Written by its thread under the engine's mu_ as it starts, read
  // by its thread anywhere and by the JS thread under mu_.
  std::atomic<uint64_t> table_token{0};
  std::atomic<size_t> containers{0};  // placement: the least loaded lane takes a new container
  // Lane 0: containers served here now whose home is another lane (placement counts them here).
  std::atomic<size_t> visitors{0};
  // Written by the lane's thread only (a load and a store: no locked add on the hot path), read by stats.
  std::atomic<uint64_t> received{0};
  // Whether other containers call (wake_mode.hpp: a container is spread only while alone): when
  // the lane last received, and when it last received from another container than the time
  // before. Written by the lane's thread only (AdviseWakeMode), read by every lane's.
  std::atomic<uint64_t> last_received_ns{0};
  std::atomic<uint64_t> mixed_since_ns{0};
  uint32_t last_handle = 0;  // the lane's own
  // The lane's own, below.
  NotifyBuffers buffers;
  AnswerTally tally;
  // The lane's clock: CLOCK_MONOTONIC read with rdtsc where that is the same clock (tsc_clock.h).
  TscClock clock{TscClockUsable()};
  // The last clock read of the hot path in this iteration (0: none): the loop's `now` for its
  // timers, so a notification costs two clock reads (receipt, answer), not four.
  uint64_t answered_ns = 0;
  bool queued = false;  // it pushed events since the queue last went out: it flushes them when due
  // After it handed a rule's call to an emulation helper, the lane polls its epoll set until then
  // (0: not polling): the helper answers the target, whose next call comes a few µs later, and a
  // lane asleep on a halted vCPU takes 10-20 µs to wake for it (docs/decision-channel.md).
  uint64_t poll_until_ns = 0;
  // The path arguments being read (kLaneStringsBytes). A thread that lost the lane while reading
  // keeps the buffer it read into and frees it; the lane's new thread gets a new one.
  std::unique_ptr<char[]> strings{new char[kLaneStringsBytes]};
  // A read of a target's memory in progress on the lane's thread (engine_read_watch.cpp): when it
  // began (0: none), whose notify fd, container and task. The thread clears read_since_ns when the
  // read returns; the read watch, when it outlived kReadStallNs, and the thread then ends.
  std::atomic<uint64_t> read_since_ns{0};
  std::atomic<int> reading_fd{-1};
  std::atomic<uint32_t> reading_handle{0};
  std::atomic<uint32_t> reading_pid{0};
  std::atomic<uint64_t> read_takeovers{0};  // threads that lost this lane to a stalled read
  bool needs_thread = false;           // the read watch's: taken over, its new thread not started yet
  bool thread_error_reported = false;  // the read watch's: that pthread_create failed, said once
  // The thread serving the lane now says it ended (Stop waits for that, not for a pthread_join:
  // the thread it started with may have been replaced, and lanes' threads are detached).
  std::mutex end_mu;
  std::condition_variable end_cv;
  bool ended = false;  // guarded by end_mu
  // What other lanes sent it, taken in order by its own thread.
  std::mutex inbox_mu;
  std::vector<LaneHandover> inbox;  // guarded by inbox_mu
  std::atomic<bool> has_inbox{false};
};

}  // namespace seccomp_agent
