// Restore: what a predecessor left (after a crash or restart, from the fd store; after a handoff,
// from the predecessor itself) taken back by fd-store name: the listener, the journal, each
// container's notify fd, and the records (one file, or 0.1.0's memfd per container). The journal
// is replayed: the ids the predecessor received and never answered are answered from the
// container's rules, else with the default (or held for the next control plane), and after a
// crash the ids it received but died before journaling are found and answered too.
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <set>
#include <utility>

#include "engine.hpp"
#include "engine_names.hpp"
#include "unix_socket.h"

namespace seccomp_agent {
namespace {

// Ids a filter hands out are consecutive (kernel/seccomp.c: next_id++), so a notification RECV'd
// by a predecessor that died before it journaled the id is among the next few after the last id it
// noted; NOTIF_ID_VALID tells it apart from ones still queued (only RECV'd ones are valid).
constexpr uint64_t kLostIdWindow = 64;

// How long a predecessor's helper may carry a request before it is taken as stuck: the pool's own
// request timeout (EmulatorOptions, 10 s) and a margin for the predecessor's death and our start.
constexpr uint64_t kPredecessorTimeoutNs = 12000000000ull;
// What such a stuck one gets, as from the predecessor's pool (never ENOSYS: "no agent").
constexpr int kStuckHelperErrno = EPERM;

}  // namespace

// The waiter's thread (predecessor_emulations.hpp). Takes the journal's and the queue's locks and
// deferred_mu_, never mu_.
void Engine::OnPredecessorEmulation(const PredecessorEmulations::Item& item, PredecessorEmulations::Fate fate) {
  const Notification& n = item.notification;
  switch (fate) {
    case PredecessorEmulations::Fate::kAnsweredByHelper:
      predecessor_answered_.fetch_add(1, std::memory_order_relaxed);
      journal_->ReleaseInFlight(item.journal_slot);
      return;
    case PredecessorEmulations::Fate::kNotDone: {
      // The engine thread decides it as if just received (its slot goes once that is done).
      predecessor_redecided_.fetch_add(1, std::memory_order_relaxed);
      PredecessorEmulations::Item later = item;
      later.notify_fd = -1;  // the waiter closes its copy; the engine thread uses the container's
      {
        std::lock_guard<std::mutex> lock(deferred_mu_);
        deferred_.push_back(later);
      }
      has_deferred_.store(true, std::memory_order_release);
      WakeThread();
      return;
    }
    case PredecessorEmulations::Fate::kTimedOut: {
      predecessor_timed_out_.fetch_add(1, std::memory_order_relaxed);
      NotifyBuffers buffers;
      Answer answer;
      answer.kind = Answer::kError;
      answer.error = kStuckHelperErrno;
      int err = 0;
      const SendResult sent = NotifySend(item.notify_fd, &buffers, n.id, answer, &err);
      journal_->ReleaseInFlight(item.journal_slot);
      queue_->PushError("notification " + std::to_string(n.id) + " of container " + std::to_string(n.handle) +
                        " was still with a helper of the predecessor after " + std::to_string(kPredecessorTimeoutNs / 1000000000ull) +
                        " s: its helpers were killed and it was answered EPERM" +
                        (sent == SendResult::kOk ? std::string() : " (NOTIF_SEND: " + ErrnoText(err) + ")"));
      queue_->Flush();
      return;
    }
  }
}

// JS thread (Restore, before the engine thread runs): not pending, so not the pending table's.
bool Engine::AnswerRecovered(Container* container, uint64_t id) {
  Answer action = DefaultAction();
  SendResult result = NotifySend(container->fd, &js_buffers_, id, action, nullptr);
  PushAnswered(container->handle, id, AnsweredBy::kRecovered, action, result, 0, false);
  return result == SendResult::kOk;
}

// JS thread, after Init and before Start.
void Engine::Restore(const std::vector<handoff::NamedFd>& fds, bool handoff, bool hold, RestoreResult* result) {
  const bool store_again = handoff;  // the fd store (if any) has none of a handoff's fds yet
  if (stopped_ || thread_started_) {
    for (const handoff::NamedFd& f : fds) close(f.fd);
    result->problems.push_back(stopped_ ? "the engine is stopped; every fd given was closed"
                                        : "restore() comes before start(); every fd given was closed");
    return;
  }
  std::unique_ptr<InFlightJournal> journal;
  std::map<uint32_t, int> notify_fds;
  std::map<uint32_t, int> record_fds;  // 0.1.0's: one memfd per container
  std::unique_ptr<RecordFile> records;
  std::map<uint32_t, int> policy_fds;
  std::vector<int> listener_fds;
  std::set<std::pair<dev_t, ino_t>> listener_inodes;
  auto refuse = [&](const handoff::NamedFd& f, const std::string& why) {
    result->problems.push_back("fd " + std::to_string(f.fd) + " named \"" + f.name + "\": " + why + "; closed it");
    close(f.fd);
    if (!store_again) UnstoreFd(f.name);  // or it comes back on every restart
  };
  for (const handoff::NamedFd& f : fds) {
    uint32_t handle = 0;
    if (f.name == "listener") {
      // One listener per socket path served (--listener-socket is repeatable). systemd passes its
      // .socket unit's listeners and the stored copies: the same socket twice, told apart by inode.
      std::string error;
      struct stat st;
      if (fstat(f.fd, &st) != 0) {
        refuse(f, "fstat: " + ErrnoText(errno));
      } else if (!listener_inodes.insert({st.st_dev, st.st_ino}).second) {
        close(f.fd);
      } else if (!ingest_->ListenFd(f.fd, &error)) {
        listener_inodes.erase({st.st_dev, st.st_ino});
        refuse(f, error);
      } else {
        listener_fds.push_back(f.fd);
        result->listener = true;
        result->listener_paths.push_back(SocketPath(f.fd));
      }
    } else if (f.name == "journal") {
      std::string error;
      if (journal != nullptr) {
        refuse(f, "a second journal");
        continue;
      }
      journal = InFlightJournal::Open(f.fd, &error);  // takes the fd
      if (journal == nullptr) result->problems.push_back(error + "; ids the predecessor had in flight may hang");
    } else if (f.name == "replays") {
      // The predecessor's replay book: its helpers' notes stay good for calls restarted across
      // this restart (the helpers of the same namespaces get the same partitions).
      std::string error;
      std::unique_ptr<ReplayBookFile> book = ReplayBookFile::Open(f.fd, &error);  // takes the fd
      if (book == nullptr) {
        result->problems.push_back(error + "; calls a signal restarts across this restart may be emulated twice");
      } else {
        replay_book_ = std::move(book);
        replay_book_stored_ = !store_again;
      }
    } else if (f.name == kRecordsName) {
      std::string error;
      if (records != nullptr) {
        refuse(f, "a second records file");
        continue;
      }
      records = RecordFile::Open(f.fd, &error);  // takes the fd
      if (records == nullptr) result->problems.push_back(error + "; its containers are served without their records");
    } else if ((handle = HandleOfName(f.name, 'n')) != 0 && notify_fds.count(handle) == 0) {
      // The fds of our own predecessor: SYNC_WAKE_UP's ioctl, which only a notify fd takes, is the
      // check too (one syscall per container inside the handoff's pause); a kernel without the
      // flag refuses it, and the fd is then looked at.
      const bool sync = NotifySetSyncWakeUp(f.fd);
      if (!sync && !IsSeccompNotifyFd(f.fd)) {
        refuse(f, "not a seccomp notify fd");
      } else {
        notify_fds[handle] = f.fd;
        sync_wake_up_.store(sync);
      }
    } else if ((handle = HandleOfName(f.name, 'r')) != 0 && record_fds.count(handle) == 0) {
      record_fds[handle] = f.fd;
    } else if ((handle = HandleOfName(f.name, 'p')) != 0 && policy_fds.count(handle) == 0) {
      policy_fds[handle] = f.fd;
    } else {
      refuse(f, "a name this data plane does not use (or a duplicate)");
    }
  }
  if (journal != nullptr) {
    journal_ = std::move(journal);
    pending_.SetJournal(journal_.get());
    result->journal = true;
    result->control_plane_attached = journal_->ControlPlaneAttached();
    journal_->SetControlPlaneAttached(false);  // until one attaches here
    journal_stored_ = !store_again;
  }
  const auto marks = journal_->ContainerMarks();
  std::unordered_map<uint32_t, uint32_t> slot_of;  // handle -> its slot in the predecessor's journal
  for (const auto& mark : marks) slot_of.emplace(mark.second.handle, mark.first);
  if (records != nullptr) {
    records_ = std::move(records);
    records_stored_ = !store_again;
  }
  std::map<uint32_t, RecordFile::Place> record_places = records_->Scan();
  // 0.1.0's records move into the file: stored before their memfds leave the store, so a crash in
  // between loses none.
  if (!record_fds.empty() && !store_again && !records_stored_) {
    StoreFd(kRecordsName, records_->fd());
    records_stored_ = true;
  }
  for (const auto& legacy : record_fds) {
    std::string json, error;
    RecordFile::Place place;
    if (notify_fds.count(legacy.first) != 0 && ReadSealedMemfd(legacy.second, &json, &error) &&
        records_->Append(legacy.first, json, &place, &error)) {
      record_places[legacy.first] = place;
    } else if (!error.empty()) {
      result->problems.push_back("record of container handle " + std::to_string(legacy.first) + ": " + error);
    }
    close(legacy.second);
    if (!store_again) UnstoreFd(RecordName(legacy.first));
  }
  std::vector<uint32_t> kept_slots;
  for (const auto& entry : notify_fds) {
    const uint32_t handle = entry.first;
    RestoreResult::Restored restored{handle, nullptr};
    // Its record is read when JS takes it (RecordOf), after a successor's ack: only JS reads it.
    RecordFile::Place record;
    auto found = record_places.find(handle);
    if (found != record_places.end()) {
      record = found->second;
      record_places.erase(found);
    }
    auto known = slot_of.find(handle);
    uint32_t slot = known != slot_of.end() ? known->second : journal_->AddContainer(handle);
    std::string error;
    // Its container id comes from JS (NameContainer), which reads the record.
    if (AddContainer(entry.second, handle, record, slot, std::string(), &error) == 0) {
      result->problems.push_back("container handle " + std::to_string(handle) + ": " + error);
      continue;
    }
    kept_slots.push_back(slot);
    if (handle >= next_handle_) next_handle_ = handle + 1;
    // Its policy, in force again before any of its notifications is read.
    auto policy = policy_fds.find(handle);
    if (policy != policy_fds.end()) {
      const int policy_fd = policy->second;
      policy_fds.erase(policy);
      std::string wire;
      PolicyVerdict verdict;
      if (!ReadSealedMemfd(policy_fd, &wire, &error)) {
        verdict.nack.detail = error;
      } else {
        verdict = rules_.Apply(handle, reinterpret_cast<const uint8_t*>(wire.data()), wire.size(), /*check_handle=*/false);
      }
      if (verdict.ack) {
        EnsureExecutorsFor(rules_.RulesFor(handle)->set);
        std::lock_guard<std::mutex> lock(mu_);
        Container* c = containers_.at(handle).get();
        c->policy_fd = policy_fd;
        c->has_policy.store(true, std::memory_order_release);
        restored.policy = rules_.RulesFor(handle);
        if (store_again) StoreFd(PolicyName(handle), policy_fd);
      } else {
        result->problems.push_back("policy of container handle " + std::to_string(handle) + " not taken back (" + verdict.nack.reason + " " +
                                   verdict.nack.detail + "): it answers as a container without policy until a control plane pushes one");
        close(policy_fd);
        if (!store_again) UnstoreFd(PolicyName(handle));
      }
    }
    result->containers.push_back(std::move(restored));
    if (store_again) StoreFd(NotifyName(handle), entry.second);
  }
  // Records of containers that left before the predecessor could drop them.
  for (const auto& orphan : record_places) records_->Release(orphan.second);
  for (const auto& orphan : policy_fds) {
    close(orphan.second);
    if (!store_again) UnstoreFd(PolicyName(orphan.first));
  }
  // The journal's replay. What the predecessor received and did not answer: nobody else ever will.
  // With a control plane attached before, the next one is asked (as if it had just arrived); else
  // the default answers.
  std::lock_guard<std::mutex> lock(mu_);
  auto in_flight = journal_->InFlightEntries();
  journal_->ClearInFlight();
  // An id can be in two slots: its container's receipt and the slot it got to wait in (the
  // predecessor died between the two writes). One decision each; a helper's mark wins, since
  // that helper may be doing it.
  std::stable_sort(in_flight.begin(), in_flight.end(),
                   [](const InFlightJournal::Entry& a, const InFlightJournal::Entry& b) { return a.with_helper && !b.with_helper; });
  const uint64_t now = MonotonicNs();
  std::vector<PredecessorEmulations::Item> with_helper;
  std::set<std::pair<uint32_t, uint64_t>> journaled;  // (handle, id): not lost, taken care of here
  for (const InFlightJournal::Entry& entry : in_flight) {
    Notification n = entry.notification;
    if (!journaled.emplace(n.handle, n.id).second) continue;
    auto it = containers_.find(n.handle);
    if (it == containers_.end()) continue;
    Container* container = it->second.get();
    if (entry.with_helper) {
      // A predecessor's helper may be doing it right now: waited for, never done twice. Journaled
      // and marked again, so a crash of this process leaves the same to the next one.
      PredecessorEmulations::Item item;
      item.notify_fd = fcntl(container->fd, F_DUPFD_CLOEXEC, 0);
      item.notification = n;
      if (item.notify_fd >= 0) {
        item.journal_slot = journal_->AddInFlight(n);
        journal_->MarkWithHelper(item.journal_slot, n.id);
        with_helper.push_back(item);
        continue;
      }
      result->problems.push_back("notification " + std::to_string(n.id) + " of container handle " + std::to_string(n.handle) +
                                 " was with a helper of the predecessor, but its fd cannot be copied (" + ErrnoText(errno) +
                                 "): decided anew now");
    }
    if (container->has_policy.load(std::memory_order_relaxed)) {
      // Its own rules answer it, as they would have had the predecessor lived.
      n.received_ns = now;
      Event event = NotificationEvent(n);
      size_t blob = 0;
      if (!ReadAtRestore(container, n, &event, &blob, result)) continue;  // its task is gone, or its lane decides it when read
      if (AnswerFromRules(/*lane=*/nullptr, container, n, event, primary_->strings.get(), blob) != RuleVerdict::kNone) {
        result->in_flight_by_rules++;
        continue;
      }
    }
    if (!hold || !result->control_plane_attached) {
      // A receipt may hold an id its predecessor answered just before it died: not counted.
      if (AnswerRecovered(container, n.id)) result->in_flight_answered++;
      continue;
    }
    n.received_ns = now;
    Event event = NotificationEvent(n);
    size_t blob = 0;
    if (!ReadAtRestore(container, n, &event, &blob, result)) continue;  // its task is gone, or its lane decides it when read
    pending_.Add(container, nullptr, n, now + decision_timeout_ns_.load(std::memory_order_relaxed),
                 HoldStrings(event, primary_->strings.get(), blob));
    result->in_flight_held++;
  }
  // A live predecessor parked before handing over: all it received is answered or journaled. Only
  // a dead one can have received an id it never journaled.
  for (const auto& mark : marks) {
    if (handoff) break;
    auto it = containers_.find(mark.second.handle);
    if (it == containers_.end() || !mark.second.has_last) continue;
    // From the last id noted itself: it is in its container's receipt unless the journal had no
    // slot for one (or the predecessor predates receipts). Past it: ids the kernel handed to a
    // RECV the predecessor was killed in, before it could note them; nothing about them is known.
    for (uint64_t k = 0; k <= kLostIdWindow; k++) {
      const uint64_t id = mark.second.last_id + k;
      if (journaled.count({mark.second.handle, id}) != 0 || !NotifyIdValid(it->second->fd, id)) continue;
      if (AnswerLostByRules(it->second.get(), id)) {
        result->in_flight_by_rules++;
      } else if (AnswerRecovered(it->second.get(), id)) {
        result->lost_answered++;
      }
    }
  }
  if (!with_helper.empty()) {
    result->in_flight_with_helper = with_helper.size();
    std::string error;
    predecessor_ = PredecessorEmulations::Start(
        std::move(with_helper), kPredecessorTimeoutNs,
        [this](const PredecessorEmulations::Item& item, PredecessorEmulations::Fate fate) { OnPredecessorEmulation(item, fate); },
        &error);
    if (predecessor_ == nullptr) {
      result->problems.push_back("cannot wait for the predecessor's helpers (" + error +
                                 "): their notifications stay in the journal and hang until the next restart");
    }
  }
  journal_->ReleaseContainersExcept(kept_slots);
  if (store_again) {
    for (int fd : listener_fds) StoreFd("listener", fd);
  }
}

// Engine thread: the predecessor's notifications that none of its helpers carried (Restore's
// deferred_), decided now as if just received.
void Engine::DecideDeferred() {
  std::vector<PredecessorEmulations::Item> items;
  {
    std::lock_guard<std::mutex> lock(deferred_mu_);
    items.swap(deferred_);
    has_deferred_.store(false, std::memory_order_relaxed);
  }
  for (PredecessorEmulations::Item& item : items) {
    Container* container = FindContainer(item.notification.handle);
    if (container != nullptr) {
      const Notification& n = item.notification;
      item.notification.received_ns = MonotonicNs();
      // Read on a thread of its own: its container may be served by another lane meanwhile, so
      // this thread cannot be taken over as a lane's is (the rest of `items` is its alone).
      Event event = NotificationEvent(n);
      size_t blob = 0;
      const ArgsRead read = ReadArgsBounded(container, n, &event, primary_->strings.get(), &blob, item.journal_slot);
      if (read == ArgsRead::kOrphaned) continue;  // lane 0 decides it when read (kDecide), then frees its slot
      if (read == ArgsRead::kRead) DecideRead(primary_, container, n, &event, blob);
    }
    // Decided (and journaled again where it waits) or its container is gone: the waiter's slot goes.
    journal_->ReleaseInFlight(item.journal_slot);
  }
}

}  // namespace seccomp_agent
