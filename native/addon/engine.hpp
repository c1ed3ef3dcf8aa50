// The engine: epoll threads ("lanes", engine_lanes.cpp) that own the containers' notify fds,
// receive notifications, read their path arguments, and either answer them on the spot (the
// container's own rules, or the default action) or hand them to the active control-plane session
// on the engine thread (lane 0), pending with a deadline owned by that session, until a decision
// answers them: from the session's decision channel (decision_channel.hpp, on lane 0), or from
// respond() at once or through an emulation (emulator.hpp, action_worker.hpp) whose result comes
// back as an event. See docs/decision-channel.md.
// Everything a successor needs survives this process: each notify fd, the records and the listener
// go to the fd store when there is one ($NOTIFY_SOCKET: systemd or seccomp-keeper), ids in flight
// to the journal (journal.hpp); Restore() takes them back, HandOff() gives them to a successor.
// Pure C++: JS sees it through engine_binding.cpp and the EventQueue.
//
// One class, one room per file:
//   engine_types.hpp      its value types: options, emulated decisions, restore result, stats
//   engine.cpp            life (init, start, stop), containers (adopt, remove), the fd store, stats
//   engine_loop.cpp       the engine thread's loop and the hot path (RECV, default answer or pend)
//   engine_lanes.cpp      the other lanes: their loop, container placement, what they hand lane 0,
//                         whether a container is alone on them all (wake_mode.hpp)
//   engine_read_watch.cpp a lane whose read of a task's memory never returns gets a new thread
//   engine_fd_tables.cpp  lanes 1.. serve with file tables of their own (no fdget reference)
//   answer_tally.*        what the engine answered by itself while nobody watches, counted
//   pending_table.*       the notifications waiting for an answer: the one take/answer/release
//   engine_sessions.cpp   control plane sessions, their decision channels, respond()
//   decision_check.*      every decision checked once, with a reason code
//   rule_table.*          the per-container rules pushed by a control plane (ACK/NACK)
//   engine_emulation.cpp  emulated decisions: the emulator and the action worker, their results
//   engine_restore.cpp    taking back what a predecessor left (fd store, handoff, journal)
//   engine_handoff.cpp    giving everything to a successor (park, send, ack)
// Built without C++ exceptions: a failed allocation (std::bad_alloc) aborts the process. Accepted:
// every queue a container or client can fill is bounded (events, channel output, journal slots,
// ingest connections), so what is allocated on the native thread is small and bounded, and under
// Linux overcommit the OOM killer acts long before such an allocation fails.
#pragma once
#include <pthread.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "answer_tally.hpp"
#include "engine_lane.hpp"
#include "action_worker.hpp"
#include "emulator.hpp"
#include "decision_channel.hpp"
#include "epoll_source.hpp"
#include "event_queue.hpp"
#include "fd_store.h"
#include "handoff.hpp"
#include "ingest.hpp"
#include "journal.hpp"
#include "pending_table.hpp"
#include "record_file.hpp"
#include "predecessor_emulations.hpp"
#include "replay_book_file.hpp"
#include "rule_table.hpp"
#include "notify_fd.hpp"
#include "target_memory.hpp"
#include "engine_types.hpp"
#include "wake_mode.hpp"

namespace seccomp_agent {

// A notification JS never had an event for: its 'answered' event stands for it too (syscall nr, arch).
struct Unseen {
  static constexpr uint32_t kNone = UINT32_MAX;
  uint32_t nr = kNone;
  uint32_t arch = 0;
};

class Engine : private ChannelSessions, private PendingTable::Owners {
 public:
  using Options = EngineOptions;
  using EmulatedDecision = EngineEmulatedDecision;
  using RespondStatus = EngineRespondStatus;
  using RestoreResult = EngineRestoreResult;
  using Stats = EngineStats;
  // How a container's tasks wait for an answer, as its emulations saw it ('D' killable: the filter
  // has WAIT_KILLABLE_RECV; 'S' interruptible: it has not). Containers not seen yet are absent.
  std::vector<std::pair<uint32_t, char>> TargetWaits();

  explicit Engine(const Options& options);
  ~Engine() override;  // Stop()

  // JS thread. Creates the epoll set, the wake eventfd and the event queue. False with *error
  // set (and maybe a JS exception pending from the TSFN creation).
  bool Init(Napi::Env env, Napi::Function on_batch, std::string* error);
  // JS thread. Starts the epoll thread; returns once it runs.
  bool Start(std::string* error);
  // JS thread. Stops and joins the thread, answers what is pending with the default action,
  // closes every fd, releases the TSFN. Idempotent.
  void Stop();
  bool stopped() const { return stopped_; }

  // JS thread.
  Ingest* ingest() { return ingest_.get(); }
  // JS thread. Adopts fd `index` of pending connection `conn`: returns the container handle, or
  // 0 with *error set (*range_error: a bad conn or index, not a system failure).
  // `record` (the container as JS knows it) is kept beside the fd for a successor; `container_id`
  // goes with each of its notifications on the decision channel.
  uint32_t Adopt(uint32_t conn, uint32_t index, const std::string& record, const std::string& container_id,
                 std::string* error, bool* range_error);
  // JS thread, after Restore and before any session is opened (the engine thread may run: a
  // successor acks its handoff before it names what it took back): the container id of a restored
  // container (read from its record by JS). kGone when the handle is unknown (the container may
  // have left since the engine started), kRefused once a session was opened: the engine thread
  // reads an id without the lock only for a notification it forwards to a session; the others read
  // it under mu_, as this writes it.
  enum class Naming { kNamed, kGone, kRefused };
  Naming NameContainer(uint32_t handle, const std::string& container_id);
  // JS thread: the record a restored container's predecessor wrote (the JSON its Adopt() was
  // given); "" with *error when it cannot be read, "" alone when it has none or the container is
  // gone. Read under mu_, under which the engine thread releases a removed container's record.
  std::string RecordOf(uint32_t handle, std::string* error);
  // JS thread. A control plane's ContainerPolicy for `handle` (serialized): checked, and when good
  // in force from the next notification on, kept in the fd store as "p<handle>" (and in a
  // handoff). `init_pid`: the container's init as the runtime named it (kill-container rules of a
  // container in the host pid namespace need it).
  PolicyVerdict ApplyPolicy(uint32_t handle, const uint8_t* wire, size_t size, pid_t init_pid);
  // Any thread. The policy in force for `handle` (null: none).
  std::shared_ptr<const PolicyInForce> PolicyOf(uint32_t handle) const { return rules_.RulesFor(handle); }
  // JS thread. Listens on the runtime socket; stored in the fd store as "listener".
  bool Listen(const std::string& path, unsigned mode, std::string* error);
  // JS thread, after Init and before Start: takes what a predecessor left, by fd-store name
  // (listener, journal, n<handle> notify fds, r<handle> records; anything else is closed), keeps
  // the handles and answers its ids in flight with the default action. `handoff`: from a live
  // predecessor (store everything again: the fd store has none of it yet); else from the fd store
  // after a crash or restart (also look for ids it received and died before journaling).
  // `hold`: if the predecessor had a control plane attached, its ids in flight wait for the next
  // one (forwarded by SetActiveSession, or answered at their deadline) instead of the default now.
  void Restore(const std::vector<handoff::NamedFd>& fds, bool handoff, bool hold, RestoreResult* result);
  // JS thread. Serves the handoff socket: a successor's connection arrives as a 'handoff' event.
  bool ListenHandoff(const std::string& path, unsigned mode, std::string* error);
  // JS thread. Stops (or resumes) accepting runtime connections; see Ingest::SetAccepting.
  void SetAccepting(bool accepting);
  // JS thread. Reads the successor's hello on `conn` (taken: closed here), stops receiving, sends
  // it every fd and waits for its ack. True: it answers from now on; this engine answers nothing
  // more (Stop() leaves what is pending to it) and has removed everything from the fd store;
  // *paused_ns: how long nothing was answered (park to ack). False with *error: receiving resumes,
  // nothing changed.
  bool HandOff(int conn, int timeout_ms, std::string* summary, uint64_t* paused_ns, std::string* error);
  bool handed_over() const { return handed_over_; }
  bool fd_store_enabled() const { return notifier_ != nullptr; }
  // JS thread. Serves the decision channel socket. False with *error set.
  bool ListenChannel(const std::string& path, unsigned mode, std::string* error);
  // JS thread. Registers session `session` (> 0) and its channel's token. False with *error set
  // (already open, or the token is another open session's).
  bool OpenSession(uint64_t session, const uint8_t token[16], std::string* error);
  // JS thread. New notifications are owned by `session` (0: answered natively). False when the
  // session is not open.
  bool SetActiveSession(uint64_t session);
  // JS thread. Closes the session's channel, answers what it owns with the default ('detached');
  // returns how many. 0 for a session that is not open.
  size_t CloseSession(uint64_t session);
  // Any thread. Notifications `session` owns.
  size_t SessionPending(uint64_t session);
  // JS thread.
  void SetDefaultAction(const Answer& action);
  // JS thread. For `ms`, while no control plane is attached, new notifications wait for one (each
  // at most the decision timeout) instead of getting the default at once: after a handoff or
  // restart from a predecessor that had one. Ends when one attaches.
  void HoldForControlPlane(uint64_t ms);
  // Any thread. Whether a natively answered notification also gets its own 'notification' event
  // (someone watches), or only its 'answered' event, which then stands for both (JS counts it).
  void SetDetailedEvents(bool detailed) { detailed_events_.store(detailed, std::memory_order_relaxed); }
  void SetDecisionTimeoutNs(uint64_t ns);
  // JS thread. Answers a notification `session` owns (0: whatever its owner); kUnknown when it is
  // not pending or another session owns it.
  RespondStatus Respond(uint32_t handle, uint64_t id, const Answer& answer, uint64_t session, uint64_t* latency_ns);
  // JS thread. The control plane answers (handle, id) later on purpose (a Hold): its deadline moves
  // to now + hold_ns + the decision timeout. kUnknown / kLate as Respond (nothing is answered).
  RespondStatus ExtendDeadline(uint32_t handle, uint64_t id, uint64_t hold_ns, uint64_t session);
  // JS thread. Takes the notification out of the pending table (its deadline no longer applies)
  // and hands it to the emulator (mkdir, mount: a helper process) or the action worker (kill,
  // freeze): neither blocks this thread. The result arrives as an 'answered' event, by
  // kControlPlane. *error explains kWrongSyscall. *latency_ns: receipt to now.
  RespondStatus RespondEmulated(uint32_t handle, uint64_t id, const EmulatedDecision& decision, uint64_t session,
                                uint64_t* latency_ns, std::string* error);
  // Any thread.
  Stats GetStats();

 private:
  using Lane = EngineLane;
  using Handover = LaneHandover;
  struct Container : EpollSource, PendingTarget {
    Container() : EpollSource(Kind::kContainer) {}
    // Where it lives (the least loaded lane when it was added), and the lane serving its fd now:
    // its home, or lane 0 while it needs the control plane (a visitor), null while it moves.
    // Only the lane serving it touches what the lane fields below say; it moves by message.
    Lane* home = nullptr;
    std::atomic<Lane*> lane{nullptr};
    uint32_t native_streak = 0;  // lane 0, a visitor: notifications in a row it answered without asking
    // Its lane: the table (EngineLane::table_token) holding a copy of its fd at its number, 0: none.
    uint64_t mirror_token = 0;
    uint32_t recv_failures = 0;  // its lane: consecutive unexpected RECV errors
    WakeModeAdvisor wake;        // its lane: where the kernel wakes its callers
    RecordFile::Place record;    // its runtime record in records_ (none: offset -1)
    uint32_t journal_slot = InFlightJournal::kNoSlot;
    // Its lane: its receipt in the journal (InFlightJournal::ReserveReceipt), taken at its
    // first notification (a restore clears the journal's slots before the thread starts).
    uint32_t receipt_slot = InFlightJournal::kNoSlot;
    bool receipt_reserved = false;
    std::string container_id;    // set before the engine thread sees the container; then read-only
    int policy_fd = -1;          // the memfd of its policy in force ("p<handle>"), -1: none
    std::atomic<bool> has_policy{false};  // lets the hot path skip the rule table for containers without
    std::atomic<pid_t> init_pid{0};       // from the runtime, for kill-container rules
    // Its lane: its policy as RulesFor gave it while the rule table's generation was
    // `policy_generation` (the hot path then needs neither the table's lock nor a reference count).
    std::shared_ptr<const PolicyInForce> policy;
    uint64_t policy_generation = UINT64_MAX;
  };
  // A control plane's session (gRPC Attach) as the engine knows it. Guarded by mu_.
  struct Session : PendingOwner {
    uint8_t token[16];
    ChannelConn* channel = nullptr;  // set and cleared by the engine thread (under mu_)
    bool drained_reported = false;   // 'session-drained' sent since it was last active
  };

  // engine_loop.cpp
  static void* ThreadMain(void* self);
  void Run();                                                             // engine thread (lane 0)
  void OnNotifyReady(Lane* lane, Container* container, uint32_t events);  // the container's lane
  // Its lane, after each answer: its callers' wake mode, changed when its advisor says so.
  void AdviseWakeMode(Lane* lane, Container* container, const Notification& n);
  // Sets the flag on its fd for `mode`, then the advisor, the gauge and the switch count follow.
  // False when the kernel refused (its filter gone with its last task): nothing changed.
  bool SwitchWakeMode(Container* container, WakeModeAdvisor::Mode mode);
  // Its lane: a notification received is decided: the container's rules, a control plane, or the
  // default. kMoved: the container went to lane 0 with it (a control plane is attached or awaited):
  // `lane` no longer serves it. kOrphaned: reading its arguments outlived kReadStallNs and a new
  // thread took the lane over; this thread, its notification handed to the lane (kResume), touches
  // nothing more and ends (engine_read_watch.cpp). kExecuted: answered, or to be, by an executor
  // (an emulation rule's): a visitor then stays on lane 0, the only lane that hands them work.
  enum class Outcome { kAnswered, kAsked, kMoved, kOrphaned, kExecuted };
  Outcome OnReceived(Lane* lane, Container* container, const Notification& n);
  // OnReceived once the arguments are read (into the lane's strings): the rules, then the rest.
  Outcome DecideRead(Lane* lane, Container* container, const Notification& n, Event* event, size_t blob);
  // What OnReceived does once the container's rules did not answer: pend it for the active
  // session (or one awaited; kAsked), or the default at once. Lane 0; another lane only while no
  // control plane is attached or awaited. `strings`: the event's path arguments.
  Outcome DecideUnanswered(Lane* lane, Container* container, const Notification& n, Event* event, const char* strings,
                           size_t blob);
  // Engine thread: the predecessor's notifications no helper did, decided as if just received.
  void DecideDeferred();
  uint64_t NextWakeNs();                                       // engine thread
  bool AwaitRings();                                           // engine thread, busy polling
  void WakeThread() { WakeLane(primary_); }                   // any thread: the loop iterates once
  static void WakeLane(Lane* lane);                            // any thread
  // The lane: the epoll timeout for a wake-up due at `wake_ns` (0 or -1; arms its timer_fd).
  static int WaitTimeoutMs(Lane* lane, uint64_t wake_ns, uint64_t now_ns);
  // The lane, at the park flag: waits (holding nothing) until Unpark() or Stop().
  void ParkLane(Lane* lane);
  // Reads the path arguments of `event` into buffer: kGone once the notification is gone. With a
  // `lane` (its thread), the read is watched (engine_read_watch.cpp): kOrphaned when it outlived
  // kReadStallNs and the lane has a new thread.
  enum class ArgsRead { kRead, kGone, kOrphaned };
  static ArgsRead ReadPathArgs(Lane* lane, int notify_fd, Event* event, char* buffer, size_t* blob);
  void PushAnswered(uint32_t handle, uint64_t id, AnsweredBy by, const Answer& action, SendResult result,
                    uint64_t latency_ns, bool urgent, Unseen unseen = Unseen(), int32_t rule = -1,
                    EmulatedKind emulated = EmulatedKind::kNone);
  // The buffers of `lane`'s thread, or the JS thread's (null: Restore, respond()).
  NotifyBuffers* BuffersOf(Lane* lane) { return lane != nullptr ? &lane->buffers : &js_buffers_; }
  // The clock of a lane's thread (its TscClock), or of the JS thread's (`lane` null).
  static uint64_t NowOf(Lane* lane) { return lane != nullptr ? lane->clock.Now() : MonotonicNs(); }
  // The one builder of an 'answered' event (PushAnswered, an emulation's report).
  static Event AnsweredEvent(uint32_t handle, uint64_t id, AnsweredBy by, const Answer& action, bool gone,
                             uint64_t latency_ns, Unseen unseen, int32_t rule, EmulatedKind emulated);
  // An answer the engine gives at once by itself: the default action (rule -1), or a rule's.
  struct NativeAnswer {
    Answer action;
    AnsweredBy by = AnsweredBy::kNoControlPlane;
    int32_t rule = -1;
  };
  // A lane, or the JS thread in Restore (`lane` null): `answer` sent for `n` and reported
  // (ReportAnswer; an error event when NOTIF_SEND fails). On a lane it is reached from
  // OnNotifyReady through inlined calls only (docs/benchmarks.md, stop 36: why the depth matters).
  void AnswerNow(Lane* lane, Container* container, const Notification& n, const Event& event, const char* strings,
                 size_t blob, const NativeAnswer& answer);
  // What the container's rules did with a notification (ApplyRules says which).
  enum class RuleVerdict { kNone, kImmediate, kTaken, kElsewhere };
  // ApplyRules, and a rule's immediate answer sent (AnswerNow). kNone: no rule answers `n` (no
  // policy, no match, or "ask"); the caller goes on as for a container without policy.
  RuleVerdict AnswerFromRules(Lane* lane, Container* container, const Notification& n, const Event& event,
                              const char* strings, size_t blob);
  // What JS hears of an answer this engine gave at once by itself (default action, or `rule`'s):
  // its notification (`strings`: its path arguments) and answer while someone watches; else a
  // count in the tally of `lane` or, on the JS thread (null), one 'answered' event for both.
  void ReportAnswer(Lane* lane, Container* container, const Notification& n, const Event& event, const char* strings,
                    size_t blob, AnsweredBy by, const Answer& action, SendResult result, uint64_t answered_ns, int32_t rule);
  // The lane: an answer it gave by itself while nobody watches, counted in its tally instead of
  // an event; DrainTally() queues the counts (at the batch delay, when the table fills, before a
  // container's 'removed', before parking or stopping).
  void TallyAnswer(Lane* lane, uint32_t handle, uint32_t nr, uint32_t arch, AnsweredBy by, SendResult result,
                   uint64_t latency_ns, uint64_t now_ns);
  bool DrainTally(Lane* lane);
  uint64_t TallyDueNs(const Lane& lane) const;
  // Under mu_: the 'answered' event of an entry the pending table answered; `by` for an owned one
  // (a held one was never seen by JS: by no control plane, and this event counts it).
  void PushSettled(const PendingTable::Answered& a, AnsweredBy by, bool urgent);

  // engine_rules.cpp
  // A lane (or the JS thread in Restore, `lane` null and mu_ held): the container's policy applied
  // to `n`, its path arguments in the lane's strings (Restore: lane 0's). kNone: no policy, no
  // match, or "ask": the caller goes on as for a container without policy. kImmediate: a rule
  // answers at once with `*immediate`, which the caller sends (AnswerNow), so a lane sends it from
  // the top of its hot path. kTaken: an emulation's executor has it, or it was refused up front
  // and answered. kElsewhere: an emulation's, on a lane with a file table of its own, which must
  // not make the fds an executor is handed: the caller moves it to lane 0 (rules_again).
  RuleVerdict ApplyRules(Lane* lane, Container* container, const Notification& n, const Event& event, size_t blob,
                         NativeAnswer* immediate);
  // JS thread: the serialized policy in force for `container` in a memfd, kept in the fd store.
  void KeepPolicy(uint32_t handle, const std::string& wire);
  // JS thread: starts the emulator and the action worker when the rules of `set` need them.
  void EnsureExecutorsFor(const RuleSet& set);
  // Under mu_: a rule's emulation handed to its executor, journaled until it reports.
  // `views`: the event's path arguments as ApplyRules matched them.
  void DispatchRuleEmulationLocked(Lane* lane, Container* container, const Notification& n, const Rule& rule, int index,
                                   const Event& event, const PathView* views);
  // A lane, or the JS thread (null): rule `index`'s emulation of `kind` refused up front, answered
  // with `answer` (an errno) at once; its notification event went out before the dispatch.
  void AnswerRefusedEmulation(Lane* lane, Container* container, const Notification& n, const Answer& answer, int index,
                              EmulatedKind kind);

  // engine_lanes.cpp
  // JS thread (Init): lanes 1.. with their epoll sets; Start/Stop: their threads.
  bool MakeLanes(std::string* error);
  bool StartLanes(std::string* error);
  void StopLanes();
  static void* LaneMain(void* arg);
  void RunLane(Lane* lane);
  // JS thread: the lane a new container goes to (the one serving the fewest).
  Lane* PlaceContainer();
  // A lane, once a wake-mode window: no lane received from another container in kAloneNs.
  bool AloneServed(const Lane* lane, uint64_t now_ns) const;
  // A lane other than 0: the container leaves its epoll set for lane 0's, which decides `n` (a
  // control plane is attached or awaited), or applies its rules again (`rules_again`: an
  // emulation's, which only lane 0 hands an executor when lanes have tables of their own). Its
  // receipt is closed first, lane 0 opens its own; a rule's stays open (the same slot).
  void MoveToPrimary(Lane* lane, Container* container, const Notification& n, const Event& event, size_t blob,
                     bool rules_again = false);
  // Lane 0: a visitor that answered natively for a while goes back to its home lane.
  void SendHome(Container* container);
  // A lane other than 0: its container's fd is done; it leaves its epoll set and lane 0 removes it.
  void HandRemoval(Lane* lane, Container* container);
  static void Send(Lane* to, Handover&& handover);  // any thread
  // The lane serving `container`: out of its epoll set, `handover` (for it) to `to`.
  void LetGo(Lane* from, Container* container, Lane* to, Handover&& handover);
  // The lane: what others sent it, in order (kVisit and kRemove to lane 0, kHome to a home lane,
  // kResume and kDecide from reads that outlived the watch).
  void TakeInbox(Lane* lane);
  static std::vector<Handover> TakeAll(Lane* lane);
  // The lane serving `container`: its fd is done (lane 0 removes it, another lane hands it over).
  void RemoveServed(Lane* lane, Container* container);
  // The lane taking it: `container` is served by `lane` from now on (in its epoll set).
  bool Serve(Lane* lane, Container* container);
  // The thread serving `lane` ends (MarkEnded, not as an orphan); Stop waits for it (WaitEnded).
  static void MarkEnded(Lane* lane);
  static void WaitEnded(Lane* lane);

  // engine_read_watch.cpp: a read of a target's memory that never returns (a page fault that a
  // userfaultfd or a FUSE server of the container holds) holds one thread, not a lane. The watch
  // gives a lane whose read outlived kReadStallNs a new thread; the container whose memory stalled
  // is out of the lane's epoll set until that read returns (its former thread hands it back,
  // kResume), so it holds at most one thread, and the lane serves everyone else meanwhile.
  bool StartReadWatch(std::string* error);  // JS thread (Start)
  void StopReadWatch();                     // JS thread (Stop, every lane ended)
  static void* ReadWatchMain(void* self);
  void WatchReads();
  // The read watch: `lane`'s read that began at `since_ns` is still stuck; a new thread serves it.
  void TakeOver(Lane* lane, uint64_t since_ns);
  void GiveThread(Lane* lane);  // the read watch: starts the lane's new thread
  // A thread whose read outlived the watch, as it returns: `n` as read to `lane` (`kind`); then it ends.
  static void HandBackOrphaned(Lane* lane, Handover::Kind kind, uint32_t journal_slot, const Notification& n,
                               const Event& event, const char* strings, size_t blob);
  // The lane taking a kResume or kDecide: its notification decided as if just read.
  void DecideReturned(Lane* lane, Container* container, Handover* h);
  void PushReturned(Lane* lane, const Notification& n);
  // ReadPathArgs on a thread of its own, waited for at most kReadStallNs, so a stalled read cannot
  // hold a data plane's start (and every container with it). Restore (JS thread, before any lane
  // runs, under mu_; `deferred_slot` none): on kOrphaned `container` is out of its lane's epoll set,
  // and the reader hands `n` to that lane (kResume) when its read returns. DecideDeferred (lane 0,
  // a predecessor's waiter): the reader hands it to lane 0 with `deferred_slot` (kDecide).
  ArgsRead ReadArgsBounded(Container* container, const Notification& n, Event* event, char* buffer, size_t* blob,
                           uint32_t deferred_slot = UINT32_MAX);
  struct BoundedRead;  // engine_read_watch.cpp

  // engine_fd_tables.cpp
  // JS thread (Init, after MakeLanes and the event queue): whether lanes 1.. can have tables of
  // their own, and the fds those tables keep.
  void PrepareFdTables(Napi::Env env);
  // A lane's thread as it starts (LaneMain): its own table, the kept fds and its containers' copies.
  void TakeOwnFdTable(Lane* lane);
  // The lane taking `container` (TakeInbox): served by it, its fd copied into the lane's table
  // first. False when epoll refused it. A copy that fails sends the container to lane 0 for good
  // (`handover` forwarded, `rehome` set): true, and `*forwarded` set.
  bool Adopt(Lane* lane, Container* container, Handover* handover, bool* forwarded);
  // The lane letting `container` go (LetGo): its copy closed, if the lane's table has one.
  void DropMirror(Lane* lane, Container* container);
  // The lane's thread: the copy Adopt makes (false, errno set, when it cannot be made).
  bool MirrorFd(Lane* lane, Container* container);
  static void* BoundedReadMain(void* arg);
  bool ReadAtRestore(Container* container, const Notification& n, Event* event, size_t* blob, RestoreResult* result);
  // True on a thread that lost its lane (it returns to its main at once); the orphans still alive.
  static bool Orphaned();
  static size_t LiveOrphans();

  // JS thread, after every lane ended (under mu_): a visit never taken gets the default.
  void AnswerUntakenVisits();

  // engine.cpp
  void RemoveContainer(Container* container);  // engine thread
  Container* FindContainer(uint32_t handle);   // takes mu_
  // JS thread (Stop), under mu_: `n`, which no session owns, gets the default as 'detached'.
  void AnswerDetachedLocked(const Notification& n, Unseen unseen);
  Answer DefaultAction() const;
  // JS thread: a new container in the table and the epoll set (0 with *error: fd closed). Its
  // caller has set SYNC_WAKE_UP on fd (Adopt after ingest's check; Restore as its check).
  uint32_t AddContainer(int fd, uint32_t handle, const RecordFile::Place& record, uint32_t journal_slot,
                        const std::string& container_id, std::string* error);
  // Keeps `fd` in the fd store under `name` (errors become 'error' events).
  void StoreFd(const std::string& name, int fd);
  void UnstoreFd(const std::string& name);

  // engine_sessions.cpp
  // PendingTable::Owners, under mu_: 'session-drained' when that left a session not active with nothing.
  bool OwnerReleased(PendingOwner* owner) override;
  // Under mu_: 'session-drained' once for a session that is not active and owns nothing.
  bool ReportIfDrainedLocked(Session* session);
  void PushDropped(uint64_t session, uint32_t handle, uint64_t id, DropReason reason);
  // Engine thread: closes the channels of sessions JS closed.
  void CloseRequestedChannels();
  // ChannelSessions (engine thread).
  uint64_t BindChannel(ChannelConn* conn, const uint8_t* token, std::string* why) override;
  void ApplyDecisions(ChannelConn* conn, uint64_t session, const decision_channel::DecisionBody* decisions,
                      size_t count) override;
  void UnbindChannel(ChannelConn* conn, uint64_t session) override;

  // engine_emulation.cpp
  // JS thread: the executors of emulations, made on first use (outside mu_; published under it).
  Emulator* EnsureEmulator();
  ActionWorker* EnsureActionWorker();
  // JS thread: the executor of `row`, made on first use; false when it is not running.
  bool EnsureExecutor(const EmulationRow& row);
  // Under mu_: whether the executor of `row` runs.
  bool ExecutorRunningLocked(const EmulationRow& row) const;
  // Under mu_: the one dispatch of every emulation, a control plane's decision (RespondEmulated)
  // and a rule's (DispatchRuleEmulationLocked) alike: hands `entry`'s notification to its row's
  // executor (which answers it) with the done callback that reports it (OnEmulated) and releases
  // entry.journal_slot. The executor runs (ExecutorRunningLocked).
  void DispatchEmulationLocked(const PendingEntry& entry, const EmulatedDecision& decision, AnsweredBy by, int32_t rule,
                               Unseen unseen);
  // Emulator or action-worker thread (inline under mu_ in rare cases): an emulation finished.
  void OnEmulated(uint32_t handle, uint64_t id, EmulatedKind kind, uint64_t received_ns, uint32_t journal_slot,
                  const ActionResult& result, AnsweredBy by = AnsweredBy::kControlPlane, int32_t rule = -1,
                  Unseen unseen = Unseen());

  // Under mu_: the executors' view of `n` (its fd borrowed); a helper's kind marks its journal
  // slot first, so a successor waits for the helper instead of doing it again.
  NotificationRef EmulationRefLocked(int notify_fd, const Notification& n, const EmulationRow& row, uint32_t journal_slot);

  // engine_restore.cpp
  // Restore(): the waiter's report on one of the predecessor's emulations (its thread).
  void OnPredecessorEmulation(const PredecessorEmulations::Item& item, PredecessorEmulations::Fate fate);
  // Restore(): answers `id` of `container` with the default action, as recovered.
  bool AnswerRecovered(Container* container, uint64_t id);
  // Restore(), under mu_ (engine_rules.cpp): a lost id (received by a predecessor that died before
  // it noted what) answered by the container's own first rule when that rule answers every
  // notification as the default would for one it does not match; false: the default's to answer.
  bool AnswerLostByRules(Container* container, uint64_t id);

  // engine_handoff.cpp
  // JS thread: the engine thread waits (holding nothing) until Unpark(): no RECV, no decision.
  void Park();
  void Unpark();
  // JS thread, parked, under mu_, after a handoff that failed once its fds were sent: every
  // container sync again, as the successor that may have restored them set them, looked at anew.
  void ResetWakeModesLocked();
  // Engine thread: a successor connected to the handoff socket.
  void AcceptHandoff();

  Options options_;
  std::unique_ptr<EventQueue> queue_;
  std::unique_ptr<Ingest> ingest_;
  std::unique_ptr<DecisionChannel> channel_;
  EpollSource handoff_source_{EpollSource::Kind::kHandoffListener};
  int handoff_fd_ = -1;
  int handoff_conn_ = -1;  // the successor's connection after a handoff, closed by Stop()
  std::unique_ptr<InFlightJournal> journal_;
  // What the emulation helpers did for calls a signal may restart (replay_book_file.hpp): made at
  // Init or taken back from a predecessor, kept in the fd store as "replays".
  std::unique_ptr<ReplayBookFile> replay_book_;
  bool replay_book_stored_ = false;  // JS thread
  std::unique_ptr<RecordFile> records_;  // every container's record, one fd for all (record_file.hpp)
  bool records_stored_ = false;          // JS thread
  std::unique_ptr<fd_store::Notifier> notifier_;  // null: no fd store
  bool journal_stored_ = false;                   // JS thread
  bool handed_over_ = false;                      // JS thread
  std::mutex park_mu_;
  std::condition_variable park_cv_;
  bool park_requested_ = false;  // guarded by park_mu_
  size_t parked_ = 0;            // guarded by park_mu_: lanes waiting in ParkLane
  std::atomic<bool> park_flag_{false};

  // Every lane (lanes_[0] is primary_, the engine thread's); made by Init, so Restore can place
  // containers before the threads start.
  std::vector<std::unique_ptr<Lane>> lanes_;
  Lane* primary_ = nullptr;

  pthread_t thread_{};
  bool thread_started_ = false;
  // The read watch's thread (engine_read_watch.cpp), stopped by watch_stop_ under watch_mu_.
  pthread_t watch_thread_{};
  bool watch_started_ = false;
  std::mutex watch_mu_;
  std::condition_variable watch_cv_;
  bool watch_stop_ = false;             // guarded by watch_mu_
  bool orphan_cap_reported_ = false;    // the read watch's
  std::atomic<uint64_t> bounded_read_stalls_{0};  // ReadArgsBounded's reads that outlived the watch
  bool session_opened_ = false;  // JS thread: OpenSession was called once (NameContainer refuses from then on)
  bool stopped_ = false;
  std::atomic<bool> stop_requested_{false};
  std::mutex start_mu_;
  std::condition_variable start_cv_;
  bool running_ = false;  // guarded by start_mu_

  // The active session's id (0: none); lets the hot path skip mu_ when no control plane is attached.
  std::atomic<uint64_t> active_session_{0};
  std::atomic<uint64_t> default_action_;  // packed Answer (kind, errno)
  std::atomic<uint64_t> decision_timeout_ns_;
  std::atomic<bool> sync_wake_up_{false};
  // WakeModeAdvisor::SpreadAt of the CPUs this process may use, read at construction (0: never).
  const uint32_t wake_spread_at_ = WakeModeAdvisor::SpreadAt(WakeModeAdvisor::UsableCpus());
  std::atomic<size_t> spread_wake_containers_{0};
  std::atomic<uint64_t> wake_mode_switches_{0};
  std::atomic<bool> detailed_events_{true};
  uint32_t next_handle_ = 1;  // JS thread

  // Guards containers_, pending_ (and the counts it keeps), sessions_ and active_; held across a
  // NOTIF_SEND of a pending notification, so its fd cannot be closed under it.
  std::mutex mu_;
  std::unordered_map<uint32_t, std::unique_ptr<Container>> containers_;
  PendingTable pending_{static_cast<PendingTable::Owners*>(this)};
  std::unordered_map<uint64_t, std::unique_ptr<Session>> sessions_;
  std::atomic<uint64_t> hold_until_ns_{0};
  Session* active_ = nullptr;
  RuleTable rules_;
  // Sessions whose channel the engine thread must close (JS closed them).
  std::vector<uint64_t> close_requests_;
  std::atomic<bool> close_requested_{false};
  std::atomic<uint64_t> channel_decisions_{0};
  std::atomic<uint64_t> decisions_dropped_{0};
  // Set by the JS thread under mu_ (the engine thread reads emulator_ under mu_ to Forget a
  // container); destroyed only by Stop(), after the engine thread has ended.
  std::unique_ptr<Emulator> emulator_;
  std::unique_ptr<ActionWorker> action_worker_;

  // The predecessor's emulations still carried by its helpers (Restore), and the ones none did,
  // waiting for the engine thread to decide them (guarded by deferred_mu_).
  std::unique_ptr<PredecessorEmulations> predecessor_;
  std::mutex deferred_mu_;
  std::vector<PredecessorEmulations::Item> deferred_;
  std::atomic<bool> has_deferred_{false};
  std::atomic<uint64_t> emulations_replayed_{0};
  std::atomic<uint64_t> predecessor_answered_{0};
  std::atomic<uint64_t> predecessor_redecided_{0};
  std::atomic<uint64_t> predecessor_timed_out_{0};
  // Containers' TargetWaits (guarded by waits_mu_: written by the executors' threads).
  std::mutex waits_mu_;
  std::unordered_map<uint32_t, char> target_waits_;

  // JS thread: when the last failed attempt to start the emulator was, and why.
  uint64_t emulator_failed_ns_ = 0;
  std::string emulator_error_;

  // Engine thread only (the rest of what it alone touches is primary_'s).
  uint64_t busy_until_ns_ = 0;
  bool forwarded_ = false;  // engine thread: this iteration forwarded a notification to a session

  NotifyBuffers js_buffers_;  // JS thread (respond, closeSession, stop)

  // engine_fd_tables.cpp: set by PrepareFdTables (JS thread) before any lane runs, then read-only.
  bool fd_tables_ = false;     // lanes 1.. unshare their file tables
  int self_pidfd_ = -1;        // this process's pidfd: pidfd_getfd takes a container's fd from the shared table
  std::vector<int> kept_fds_;  // what a lane's own table keeps of the shared one (sorted)
  std::atomic<uint64_t> next_table_token_{1};
  std::atomic<bool> mirror_error_reported_{false};
};

}  // namespace seccomp_agent
