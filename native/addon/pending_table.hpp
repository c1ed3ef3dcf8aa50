// The notifications received and not answered yet: each waits for its owner (a control plane's
// session, or nobody yet: held for one that has not attached) until a decision or its deadline.
// The table owns the one sequence every answer goes through: take it out (its container's count,
// its owner's count, its held strings), answer it (NOTIF_SEND; a refused answer is replaced by the
// fallback, so the target never hangs), then release its journal slot (after the send, never
// before: a crash in between must leave it journaled). Emulations split the sequence: Take now,
// the executor answers, ReleaseSlot when it reports.
// Not thread-safe: every method runs under the engine's mu_ (on the thread its comment names).
// Pure C++ (no N-API): test/cmd/native-tests exercises it on real notify fds.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <queue>
#include <string>
#include <unordered_map>
#include <vector>

#include "event.hpp"
#include "journal.hpp"
#include "notification.hpp"
#include "notify_fd.hpp"

namespace seccomp_agent {

// Who a pending notification waits for: a control plane's session (the engine's Session is one).
struct PendingOwner {
  uint64_t id = 0;
  uint32_t owned = 0;  // pending notifications it owns; kept by the table
};

// The notify fd a pending notification is answered through (the engine's Container is one).
struct PendingTarget {
  int fd = -1;
  uint32_t handle = 0;
  uint32_t pending_count = 0;  // kept by the table
};

struct PendingKey {
  uint32_t handle;
  uint64_t id;
  bool operator==(const PendingKey& o) const { return handle == o.handle && id == o.id; }
};
struct PendingKeyHash {
  size_t operator()(const PendingKey& k) const { return std::hash<uint64_t>()(k.id ^ (uint64_t(k.handle) << 40)); }
};

// The path strings read when a held notification arrived: what it is forwarded with later.
struct HeldStrings {
  uint8_t count = 0;
  StringArg strings[6];
  std::string blob;
};

// Any thread: the strings of `event` (their text in `blob`) kept for when it is forwarded.
inline HeldStrings HoldStrings(const Event& event, const char* blob, size_t length) {
  HeldStrings held;
  held.count = event.string_count;
  for (uint8_t k = 0; k < event.string_count; k++) held.strings[k] = event.strings[k];
  held.blob.assign(blob, length);
  return held;
}

struct PendingEntry {
  PendingTarget* target = nullptr;
  PendingOwner* owner = nullptr;  // null: held; an owner outlives its entries (closing answers them)
  Notification notification;      // as received; received_ns is where latencies start
  uint64_t deadline_ns = 0;
  uint32_t journal_slot = InFlightJournal::kNoSlot;
};

class PendingTable {
 public:
  // The sessions' side of ownership.
  class Owners {
   public:
    virtual ~Owners() = default;
    // Under mu_: `owner` owns one notification less. True when that drained it (an urgent
    // 'session-drained' was queued: a JS-thread caller flushes the queue).
    virtual bool OwnerReleased(PendingOwner* owner) = 0;
  };
  // What one answer did.
  struct Answered {
    PendingEntry entry;
    SendResult result = SendResult::kOk;
    int err = 0;         // the first send's errno when result is kFailed
    Answer sent;         // what the target got: the answer, or the fallback when the answer was refused
    bool drained = false;     // set after the report
    uint64_t latency_ns = 0;  // receipt to the send
  };
  using Report = std::function<void(const Answered&)>;

  explicit PendingTable(Owners* owners) : owners_(owners) {}

  // JS thread (Init, Restore): the journal slots are released to.
  void SetJournal(InFlightJournal* journal) { journal_ = journal; }

  // Any thread.
  size_t size() const { return entries_.size(); }
  bool empty() const { return entries_.empty(); }

  // Engine thread (a new notification) or JS thread (Restore, before the engine thread runs):
  // journals it and keeps it until `deadline_ns`. `owner` null: held, with `held` its strings.
  void Add(PendingTarget* target, PendingOwner* owner, const Notification& n, uint64_t deadline_ns,
           HeldStrings held = HeldStrings());
  // Any thread. The entry for (handle, id), or null. Valid until the table changes.
  const PendingEntry* Find(uint32_t handle, uint64_t id) const;
  // Any thread (under mu_). Moves (handle, id)'s deadline to `deadline_ns` when that is later;
  // false when it is not pending. The heap is not touched (the engine thread reads its top without
  // mu_): ExpireDue finds the old item, sees the later deadline, and re-queues it then.
  bool Extend(uint32_t handle, uint64_t id, uint64_t deadline_ns);
  // Any thread. Whether its deadline answered (handle, id) recently (a decision for it is 'late').
  bool AnsweredLate(uint32_t handle, uint64_t id) const;

  // Any thread. The whole sequence for one entry: take, send `answer` (`fallback` when the kernel
  // refuses it), release the slot. Callers check it first (decision_check.hpp); one that is not
  // pending is answered nothing (result kGone).
  // `report` (optional) sees it before its owner is released: an answered event then comes before
  // the 'session-drained' it may cause.
  Answered Settle(uint32_t handle, uint64_t id, const Answer& answer, const Answer& fallback, NotifyBuffers* buffers,
                  const Report* report = nullptr);
  // JS thread, for an emulation: takes it out (it must be pending: CheckPending first); the slot
  // stays journaled until ReleaseSlot.
  PendingEntry Take(uint32_t handle, uint64_t id, bool* drained);
  // Any thread (an emulation's executor, after it answered).
  void ReleaseSlot(uint32_t slot);

  // The sequence for every entry `owner` owns (JS thread: closeSession) or for all of them (JS
  // thread: Stop), each answered with `answer`; `report` sees each. Returns how many. Drained is
  // reported to Owners as for any other answer.
  size_t SettleOwnedBy(PendingOwner* owner, const Answer& answer, NotifyBuffers* buffers, const Report& report);
  size_t SettleAll(const Answer& answer, NotifyBuffers* buffers, const Report& report);
  // Engine thread: every entry past its deadline at `now_ns`, answered with `answer` and noted as
  // late.
  void ExpireDue(uint64_t now_ns, const Answer& answer, NotifyBuffers* buffers, const Report& report);
  // Any thread. The earliest deadline (UINT64_MAX: none; may be a stale one, which ExpireDue drops).
  uint64_t NextDeadline() const { return deadlines_.empty() ? UINT64_MAX : deadlines_.top().at; }

  // Engine thread: the container's notify fd is closed: its entries go without an answer (the
  // kernel fails them), their slots are released.
  void DropTarget(PendingTarget* target);
  // JS thread: `owner` takes every held entry; `forward` sees each with its strings.
  void GiveHeldTo(PendingOwner* owner, const std::function<void(const PendingEntry&, const HeldStrings&)>& forward);
  // JS thread (Stop, after the engine thread ended, or handed over): forgets everything unanswered.
  void Clear();

 private:
  struct Deadline {
    uint64_t at;
    PendingKey key;
    bool operator>(const Deadline& o) const { return at > o.at; }
  };
  using Map = std::unordered_map<PendingKey, PendingEntry, PendingKeyHash>;
  PendingEntry TakeAt(Map::iterator it);
  bool ReleaseOwner(PendingOwner* owner);
  Answered Finish(const PendingEntry& entry, const Answer& answer, const Answer& fallback, NotifyBuffers* buffers,
                  const Report* report);
  void CompactDeadlines();

  Owners* const owners_;
  InFlightJournal* journal_ = nullptr;
  Map entries_;
  std::unordered_map<PendingKey, HeldStrings, PendingKeyHash> held_;
  // Answered entries leave stale heap items behind (dropped when their time comes); rebuilt when
  // they outnumber the live ones, so memory stays bounded.
  std::priority_queue<Deadline, std::vector<Deadline>, std::greater<Deadline>> deadlines_;
  // Recently deadline-answered notifications, so a decision for one is reported 'late'.
  static constexpr size_t kLateRing = 1024;
  PendingKey late_[kLateRing] = {};
  size_t late_next_ = 0;
};

}  // namespace seccomp_agent
