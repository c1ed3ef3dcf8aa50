// The engine's value types (engine.hpp): its options, what JS passes it for an emulated decision,
// what respond() says, what Restore() found, and its stats. Apart so that engine.hpp is the
// engine's interface and state, not its vocabulary; Engine names them as Engine::Options and so on.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "emulation_table.hpp"
#include "emulator.hpp"
#include "kill_freeze.hpp"
#include "notify_fd.hpp"
#include "rule_table.hpp"

namespace seccomp_agent {

struct EngineOptions {
  Answer default_action;  // kContinue or kError
  uint64_t decision_timeout_ns = 2000000000ull;
  uint64_t batch_delay_ns = 1000000ull;
  // While a control plane holds notifications, poll (epoll timeout 0) this long after the last
  // event instead of sleeping: its decision then costs no wake-up (0: always sleep). The kept
  // emulation helpers poll as long after each answer. See docs/benchmarks.md for what a
  // wake-up costs.
  uint64_t busy_poll_ns = 0;
  // Threads that receive and answer (lanes, at least 1): each container's fd is served by one,
  // the least loaded when it is added, so a container that floods the agent queues only the
  // containers of its own lane. Lane 0 is the engine thread (sessions, channel, timers).
  size_t lanes = 1;
  // Lanes 1.. serve with a file table of their own (engine_fd_tables.cpp): a syscall naming an fd
  // then takes no reference on its file, as it must while other threads share the table.
  bool lane_fd_tables = true;
  uint64_t ingest_timeout_ns = 5000000000ull;
  size_t ingest_max_bytes = 1024 * 1024;
  size_t max_queued_events = 65536;
  std::string helper_path;  // seccomp-nshelper, for emulated mkdir and mount
};
// A control plane's decision the engine performs for the target (see docs/emulation.md).
struct EngineEmulatedDecision {
  EmulatedKind kind = EmulatedKind::kNone;  // a row of emulation_table.hpp (ParseEmulated sets it)
  MkdirArgs mkdir;  // a path call (mkdir): dirfd is taken from the notification, never from here
  MountArgs mount;
  KillArgs kill;    // init_pid and signal (init_pidfd unused)
  int32_t error = 0;  // kill, freeze: the errno the syscall gets once the action is done
};
// kAccepted: an emulation took the notification; an 'answered' event follows.
// kWrongSyscall: mkdir or mount for a notification of another syscall; it stays pending.
enum class EngineRespondStatus { kOk, kUnknown, kLate, kGone, kAccepted, kWrongSyscall };
// What Restore() found and did.
struct EngineRestoreResult {
  struct Restored {
    uint32_t handle;
    std::shared_ptr<const PolicyInForce> policy;  // the policy it had in force, in force again (or null)
  };
  std::vector<Restored> containers;
  bool listener = false;
  std::vector<std::string> listener_paths;  // each listening socket taken back (once per socket)
  bool journal = false;
  bool control_plane_attached = false;  // the predecessor had one when it stopped
  size_t in_flight_answered = 0;  // the predecessor's ids in flight, answered with the default
  size_t in_flight_held = 0;      // ... or held for the next control plane (it had one attached)
  size_t lost_answered = 0;       // ids it received but never journaled, found past each last id
  size_t in_flight_by_rules = 0;  // ... answered by the container's own policy
  size_t in_flight_with_helper = 0;  // ... carried by a helper of the predecessor: waited for
  std::vector<std::string> problems;  // fds refused and closed, with why
};
struct EngineStats {
  size_t containers = 0;
  size_t pending = 0;
  size_t pending_connections = 0;
  uint64_t events_dropped = 0;
  bool sync_wake_up = false;
  // Containers whose callers are now woken where the scheduler likes, not on their lane's CPU
  // (many of their threads call at once: wake_mode.hpp), and how often a container changed mode.
  size_t spread_wake_containers = 0;
  uint64_t wake_mode_switches = 0;
  size_t emulation_helpers = 0;
  uint64_t channel_decisions = 0;
  uint64_t decisions_dropped = 0;
  // Restarted calls a helper answered with the outcome of the emulation it had already done
  // for their first notification (nshelper_replay.hpp).
  uint64_t emulations_replayed = 0;
  // Emulation helpers that died unasked (OOM, a kill), and the requests they had in hand that a
  // fresh helper served (NsHelperPool::OnExit).
  uint64_t emulation_helpers_died = 0;
  uint64_t emulations_retried = 0;
  // A predecessor's emulations found in flight at a restore (predecessor_emulations.hpp):
  // still waited for, answered by its helper, decided anew (no helper had done them), timed out.
  size_t predecessor_waiting = 0;
  uint64_t predecessor_answered = 0;
  uint64_t predecessor_redecided = 0;
  uint64_t predecessor_timed_out = 0;
  // Reads of a task's memory that outlived the read watch (engine_read_watch.cpp): lanes taken
  // over, and bounded reads (a restore's, a predecessor's waiter's) handed on when they return.
  uint64_t read_stalls = 0;
  // Per lane: the containers it serves, the notifications it received, and whether its thread
  // serves with a file table of its own (engine_fd_tables.cpp).
  struct Lane {
    size_t containers = 0;
    uint64_t received = 0;
    bool own_fd_table = false;
  };
  std::vector<Lane> lanes;
};

}  // namespace seccomp_agent
