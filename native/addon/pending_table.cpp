#include "pending_table.hpp"

#include <utility>

namespace seccomp_agent {
namespace {

bool SameAnswer(const Answer& a, const Answer& b) {
  return a.kind == b.kind && a.error == b.error && a.value == b.value;
}

}  // namespace

// Engine thread, or the JS thread before it runs. The map and the heap grow here; a failed
// allocation aborts (no exceptions): accepted, since the kernel's OOM killer acts long before an
// allocation of a few dozen bytes fails under overcommit, and each entry stands for a task the
// kernel holds blocked (bounded by the containers' own task limits).
void PendingTable::Add(PendingTarget* target, PendingOwner* owner, const Notification& n, uint64_t deadline_ns,
                       HeldStrings held) {
  const PendingKey key{n.handle, n.id};
  PendingEntry entry;
  entry.target = target;
  entry.owner = owner;
  entry.notification = n;
  entry.deadline_ns = deadline_ns;
  entry.journal_slot = journal_ != nullptr ? journal_->AddInFlight(n) : InFlightJournal::kNoSlot;
  entries_.emplace(key, entry);
  target->pending_count++;
  if (owner != nullptr) {
    owner->owned++;
  } else {
    held_.emplace(key, std::move(held));
  }
  deadlines_.push(Deadline{deadline_ns, key});
  if (deadlines_.size() > 2 * entries_.size() + 4096) CompactDeadlines();
}

const PendingEntry* PendingTable::Find(uint32_t handle, uint64_t id) const {
  auto it = entries_.find(PendingKey{handle, id});
  return it == entries_.end() ? nullptr : &it->second;
}

bool PendingTable::Extend(uint32_t handle, uint64_t id, uint64_t deadline_ns) {
  auto it = entries_.find(PendingKey{handle, id});
  if (it == entries_.end()) return false;
  if (deadline_ns > it->second.deadline_ns) it->second.deadline_ns = deadline_ns;
  return true;
}

bool PendingTable::AnsweredLate(uint32_t handle, uint64_t id) const {
  for (const PendingKey& key : late_) {
    if (key.handle == handle && key.id == id) return true;
  }
  return false;
}

// Under mu_ (any thread): the one place an entry leaves the table (its owner is released by
// ReleaseOwner, once what it was answered with is reported).
PendingEntry PendingTable::TakeAt(Map::iterator it) {
  PendingEntry entry = it->second;
  if (entry.owner == nullptr) held_.erase(it->first);
  entries_.erase(it);
  entry.target->pending_count--;
  if (entry.owner != nullptr) entry.owner->owned--;
  return entry;
}

// Under mu_ (any thread).
bool PendingTable::ReleaseOwner(PendingOwner* owner) {
  return owner != nullptr && owners_->OwnerReleased(owner);
}

// Under mu_ (any thread): what follows every take but an emulation's: the send, the slot's
// release, the report, the owner's release (so a 'session-drained' follows the last answer).
PendingTable::Answered PendingTable::Finish(const PendingEntry& entry, const Answer& answer, const Answer& fallback,
                                            NotifyBuffers* buffers, const Report* report) {
  Answered a;
  a.entry = entry;
  a.sent = answer;
  a.result = NotifySend(entry.target->fd, buffers, entry.notification.id, answer, &a.err);
  if (a.result == SendResult::kFailed && !SameAnswer(answer, fallback)) {
    // The kernel refused this answer; the target must not hang: it gets the fallback.
    NotifySend(entry.target->fd, buffers, entry.notification.id, fallback, nullptr);
    a.sent = fallback;
  }
  ReleaseSlot(entry.journal_slot);
  a.latency_ns = Elapsed(entry.notification.received_ns, MonotonicNs());
  if (report != nullptr) (*report)(a);
  a.drained = ReleaseOwner(entry.owner);
  return a;
}

PendingTable::Answered PendingTable::Settle(uint32_t handle, uint64_t id, const Answer& answer, const Answer& fallback,
                                            NotifyBuffers* buffers, const Report* report) {
  auto it = entries_.find(PendingKey{handle, id});
  if (it == entries_.end()) {
    Answered none;
    none.result = SendResult::kGone;
    return none;
  }
  return Finish(TakeAt(it), answer, fallback, buffers, report);
}

PendingEntry PendingTable::Take(uint32_t handle, uint64_t id, bool* drained) {
  PendingEntry entry = TakeAt(entries_.find(PendingKey{handle, id}));
  *drained = ReleaseOwner(entry.owner);
  return entry;
}

void PendingTable::ReleaseSlot(uint32_t slot) {
  if (journal_ != nullptr) journal_->ReleaseInFlight(slot);
}

size_t PendingTable::SettleOwnedBy(PendingOwner* owner, const Answer& answer, NotifyBuffers* buffers,
                                   const Report& report) {
  size_t count = 0;
  for (auto it = entries_.begin(); it != entries_.end() && (owner == nullptr || owner->owned > 0);) {
    if (owner != nullptr && it->second.owner != owner) {
      ++it;
      continue;
    }
    auto next = std::next(it);
    Finish(TakeAt(it), answer, answer, buffers, &report);
    count++;
    it = next;
  }
  return count;
}

size_t PendingTable::SettleAll(const Answer& answer, NotifyBuffers* buffers, const Report& report) {
  return SettleOwnedBy(nullptr, answer, buffers, report);
}

void PendingTable::ExpireDue(uint64_t now_ns, const Answer& answer, NotifyBuffers* buffers, const Report& report) {
  while (!deadlines_.empty() && deadlines_.top().at <= now_ns) {
    const Deadline d = deadlines_.top();
    deadlines_.pop();
    auto it = entries_.find(d.key);
    if (it == entries_.end()) continue;  // answered already
    if (it->second.deadline_ns != d.at) {
      // Extended (Extend): its item comes back at the later deadline. Only later ones exist: Add
      // pushes the entry's own deadline, and Extend never makes it earlier.
      if (it->second.deadline_ns > d.at) deadlines_.push(Deadline{it->second.deadline_ns, d.key});
      continue;
    }
    late_[late_next_] = d.key;
    late_next_ = (late_next_ + 1) % kLateRing;
    Finish(TakeAt(it), answer, answer, buffers, &report);
  }
}

void PendingTable::DropTarget(PendingTarget* target) {
  for (auto it = entries_.begin(); it != entries_.end() && target->pending_count > 0;) {
    if (it->second.target != target) {
      ++it;
      continue;
    }
    auto next = std::next(it);
    const PendingEntry entry = TakeAt(it);
    ReleaseSlot(entry.journal_slot);
    ReleaseOwner(entry.owner);
    it = next;
  }
}

void PendingTable::GiveHeldTo(PendingOwner* owner,
                              const std::function<void(const PendingEntry&, const HeldStrings&)>& forward) {
  for (auto& held : held_) {
    auto it = entries_.find(held.first);
    if (it == entries_.end() || it->second.owner != nullptr) continue;
    it->second.owner = owner;
    owner->owned++;
    forward(it->second, held.second);
  }
  held_.clear();
}

void PendingTable::Clear() {
  entries_.clear();
  held_.clear();
  deadlines_ = decltype(deadlines_)();
}

void PendingTable::CompactDeadlines() {
  std::vector<Deadline> live;
  live.reserve(entries_.size());
  for (const auto& entry : entries_) live.push_back(Deadline{entry.second.deadline_ns, entry.first});
  deadlines_ = decltype(deadlines_)(std::greater<Deadline>(), std::move(live));
}

}  // namespace seccomp_agent
