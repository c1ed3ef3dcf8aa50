// What a successor must find once this process is gone (SIGKILL or a planned handoff): which
// notifications were received and not yet answered, and the last id each container's filter
// delivered. A RECV'd notification is never delivered again, so an id nobody remembers hangs its
// task for good (DESIGN.md). The journal is a memfd that the fd store (systemd, seccomp-keeper) or
// the handoff keeps alive; every write is a plain store into its shared mapping, no syscall.
//
// Layout (little endian, version 2): a 64-byte header, kNotificationSlots slots of {u64 id,
// u32 handle, u32 state, u32 pid, u32 nr, u32 arch, u32 helper_mark, u64 ip, u64 args[6]} (enough
// for a successor to ask a control plane again), then kContainerSlots slots of {u32 handle, u32
// has_last, u64 last_id}. helper_mark was padding before 0.2.0 (always 0 there): a release that
// does not know it replays the slot as any other, as it always did.
#pragma once
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "notification.hpp"

namespace seccomp_agent {

class InFlightJournal {
 public:
  // The layout's version (above); a successor's hello names the ones it reads (handoff_formats.hpp).
  static constexpr uint32_t kFormatVersion = 2;
  static constexpr uint32_t kNotificationSlots = 65536;
  static constexpr uint32_t kContainerSlots = 16384;
  static constexpr uint32_t kNoSlot = UINT32_MAX;

  // A notification as the journal keeps it: the engine's one record (received_ns is not kept).
  using InFlight = Notification;
  struct ContainerMark {
    uint32_t handle;
    uint64_t last_id;  // valid when has_last
    bool has_last;
  };

  // A new, empty journal in a new memfd. nullptr with *error.
  static std::unique_ptr<InFlightJournal> Create(std::string* error);
  // A predecessor's journal (takes fd). nullptr with *error (fd closed) when it is not one.
  static std::unique_ptr<InFlightJournal> Open(int fd, std::string* error);
  ~InFlightJournal();
  InFlightJournal(const InFlightJournal&) = delete;
  InFlightJournal& operator=(const InFlightJournal&) = delete;

  int fd() const { return fd_; }

  // Any thread. It was received and waits for an answer: its slot, or kNoSlot when full.
  uint32_t AddInFlight(const InFlight& notification);
  // Any thread. Call after the answer was sent, never before: a crash in between must leave it here.
  void ReleaseInFlight(uint32_t slot);

  // A container's receipt: the slot that holds its notification from the moment RECV returns it
  // until it is answered or has a slot of its own (a control plane's or a helper's wait). The
  // engine thread decides one notification at a time, so one slot per container covers the
  // window in which a dead data plane would otherwise leave an id nobody knows (issue 16: a
  // successor decides it with its syscall and arguments instead of answering it blindly). The
  // slot is an ordinary in-flight slot: a successor of any version replays it as one.
  // Engine thread, once per container (kNoSlot when the journal is full: no receipts for it).
  uint32_t ReserveReceipt() { return PopFree(&free_notifications_); }
  // Engine thread, right after RECV: the notification in the container's receipt.
  void OpenReceipt(uint32_t slot, const InFlight& notification) {
    if (slot != kNoSlot) Fill(slot, notification);
  }
  // Engine thread, once it is answered or journaled elsewhere; the slot stays the container's
  // (ReleaseInFlight gives it back when the container goes).
  void CloseReceipt(uint32_t slot);
  // Any thread, before the notification goes to a helper process: the helper outlives this
  // process for the request it carries (it answers the target itself), so a successor must wait
  // for it rather than emulate the call a second time (docs/emulation.md, "Exactly once").
  void MarkWithHelper(uint32_t slot, uint64_t id);
  struct Entry {
    InFlight notification;
    bool with_helper;  // MarkWithHelper was called for it
  };
  // What a predecessor left in flight.
  std::vector<Entry> InFlightEntries() const;
  // Frees every notification slot (after the successor answered them).
  void ClearInFlight();

  // A container's slot for its last received id (kNoSlot when full: its lost ids cannot be found).
  uint32_t AddContainer(uint32_t handle);
  // Engine thread, right after each RECV.
  void NoteReceived(uint32_t container_slot, uint64_t id) {
    if (container_slot == kNoSlot) return;
    ContainerSlot& c = containers_[container_slot];
    c.last_id.store(id, std::memory_order_relaxed);
    c.has_last.store(1, std::memory_order_release);
  }
  void ReleaseContainer(uint32_t container_slot);
  // The containers a predecessor knew, with their slots (to keep them).
  std::vector<std::pair<uint32_t, ContainerMark>> ContainerMarks() const;
  // After a restore: frees the slots of containers that did not come back.
  void ReleaseContainersExcept(const std::vector<uint32_t>& kept_slots);

  // Whether a control plane is attached: a successor waits a moment for one to come back rather
  // than answering with the default at once.
  void SetControlPlaneAttached(bool attached) {
    if (detached_.load(std::memory_order_acquire)) return;
    __atomic_store_n(&static_cast<Header*>(base_)->control_plane, attached ? 1 : 0, __ATOMIC_RELEASE);
  }
  bool ControlPlaneAttached() const {
    return __atomic_load_n(&static_cast<const Header*>(base_)->control_plane, __ATOMIC_ACQUIRE) != 0;
  }

  // This process handed the journal over: from now on it writes nothing to it (an emulation of
  // the predecessor finishing late must not free a slot the successor reused).
  void Detach() { detached_.store(true, std::memory_order_release); }

 private:
  struct Header {
    char magic[8];
    uint32_t version;
    uint32_t notification_slots;
    uint32_t container_slots;
    uint8_t control_plane;  // 1 while a control plane is attached
    uint8_t reserved[43];
  };
  struct NotificationSlot {
    std::atomic<uint64_t> id;
    std::atomic<uint32_t> handle;
    std::atomic<uint32_t> state;  // 0 free, 1 in flight; written last (release), read first (acquire)
    uint32_t pid;
    uint32_t nr;
    uint32_t arch;
    uint32_t helper_mark;  // HelperMark(id) once MarkWithHelper: the id's own, so a stale one never matches
    uint64_t ip;
    uint64_t args[6];
  };
  struct ContainerSlot {
    std::atomic<uint32_t> handle;
    std::atomic<uint32_t> has_last;
    std::atomic<uint64_t> last_id;
  };
  static_assert(sizeof(Header) == 64, "journal header is 64 bytes");
  static_assert(sizeof(NotificationSlot) == 88 && sizeof(ContainerSlot) == 16, "journal slot sizes are the format's");
  static size_t MappedBytes();

  InFlightJournal(int fd, void* base);
  void RebuildFreeLists();
  // journal.cpp: which slots may be in use, read without allocating a page of a hole.
  std::vector<bool> WrittenSlots(const void* key, size_t key_bytes, size_t slot_bytes, uint32_t count) const;
  std::vector<bool> NotificationsInUse() const;
  std::vector<bool> ContainersInUse() const;
  // Writes the notification into `slot` and marks it in flight (unless detached).
  void Fill(uint32_t slot, const InFlight& notification);
  // A free slot of the list, kNoSlot when none (or detached).
  uint32_t PopFree(std::vector<uint32_t>* free_slots);

  int fd_;
  void* base_;
  NotificationSlot* notifications_;
  ContainerSlot* containers_;
  std::atomic<bool> detached_{false};
  std::mutex mu_;  // guards the free lists (process memory, not shared)
  std::vector<uint32_t> free_notifications_;
  std::vector<uint32_t> free_containers_;
};

}  // namespace seccomp_agent
