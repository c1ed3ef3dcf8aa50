#include "journal.hpp"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>

namespace seccomp_agent {
namespace {

constexpr char kMagic[8] = {'S', 'C', 'A', 'J', 'R', 'N', 'L', '1'};
constexpr uint32_t kVersion = InFlightJournal::kFormatVersion;

// A slot's helper mark is derived from its id: a release that never writes the field (0.1.0)
// leaves a mark another id cannot match.
uint32_t HelperMark(uint64_t id) { return static_cast<uint32_t>(id ^ (id >> 32)) ^ 0x48454c50u; }

std::string ErrnoText(const char* what) { return std::string(what) + ": " + strerror(errno); }

// Maps `bytes` of fd shared; on failure closes fd and says why (`what` names the journal).
void* MapOrClose(int fd, size_t bytes, const std::string& what, std::string* error) {
  void* base = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (base != MAP_FAILED) return base;
  *error = ErrnoText(("mmap of " + what).c_str());
  close(fd);
  return nullptr;
}

}  // namespace

size_t InFlightJournal::MappedBytes() {
  return sizeof(Header) + kNotificationSlots * sizeof(NotificationSlot) + kContainerSlots * sizeof(ContainerSlot);
}

InFlightJournal::InFlightJournal(int fd, void* base)
    : fd_(fd),
      base_(base),
      notifications_(reinterpret_cast<NotificationSlot*>(static_cast<char*>(base) + sizeof(Header))),
      containers_(reinterpret_cast<ContainerSlot*>(reinterpret_cast<char*>(notifications_) +
                                                   kNotificationSlots * sizeof(NotificationSlot))) {}

InFlightJournal::~InFlightJournal() {
  munmap(base_, MappedBytes());
  close(fd_);
}

std::unique_ptr<InFlightJournal> InFlightJournal::Create(std::string* error) {
  int fd = memfd_create("seccomp-agent-journal", MFD_CLOEXEC);
  if (fd < 0) {
    *error = ErrnoText("memfd_create of the in-flight journal");
    return nullptr;
  }
  // Pages stay unallocated until touched: the free lists hand out low slots first.
  if (ftruncate(fd, static_cast<off_t>(MappedBytes())) != 0) {
    *error = ErrnoText("ftruncate of the in-flight journal");
    close(fd);
    return nullptr;
  }
  void* base = MapOrClose(fd, MappedBytes(), "the in-flight journal", error);
  if (base == nullptr) return nullptr;
  Header* header = static_cast<Header*>(base);
  header->version = kVersion;
  header->notification_slots = kNotificationSlots;
  header->container_slots = kContainerSlots;
  memcpy(header->magic, kMagic, sizeof kMagic);
  std::unique_ptr<InFlightJournal> journal(new InFlightJournal(fd, base));
  journal->RebuildFreeLists();
  return journal;
}

std::unique_ptr<InFlightJournal> InFlightJournal::Open(int fd, std::string* error) {
  struct stat st;
  if (fstat(fd, &st) != 0 || static_cast<size_t>(st.st_size) != MappedBytes()) {
    *error = "the fd named journal is not an in-flight journal of this version (size " +
             std::to_string(static_cast<long long>(st.st_size)) + ")";
    close(fd);
    return nullptr;
  }
  void* base = MapOrClose(fd, MappedBytes(), "the predecessor's in-flight journal", error);
  if (base == nullptr) return nullptr;
  const Header* header = static_cast<const Header*>(base);
  if (memcmp(header->magic, kMagic, sizeof kMagic) != 0 || header->version != kVersion ||
      header->notification_slots != kNotificationSlots || header->container_slots != kContainerSlots) {
    *error = "the fd named journal has no in-flight journal header of version " + std::to_string(kVersion);
    munmap(base, MappedBytes());
    close(fd);
    return nullptr;
  }
  int flags = fcntl(fd, F_GETFD);
  if (flags >= 0) fcntl(fd, F_SETFD, flags | FD_CLOEXEC);
  std::unique_ptr<InFlightJournal> journal(new InFlightJournal(fd, base));
  journal->RebuildFreeLists();
  return journal;
}

// Which of `count` slots, `slot_bytes` apart, may be in use: those whose key field (the one
// written last, read first: `key` is the first slot's, `key_bytes` long) lies on a page of the
// memfd. Any other slot is free without being read: reading it would allocate its page (shmem
// does on a read fault; a slot may straddle a written page and a hole), and a journal read whole
// costs each process that opens it 6 MiB of memory. The other fields of a slot in use were written
// before its key, so their pages exist. A kernel without SEEK_DATA on memfds: every slot is read.
std::vector<bool> InFlightJournal::WrittenSlots(const void* key, size_t key_bytes, size_t slot_bytes, uint32_t count) const {
  std::vector<bool> written(count, false);
  // Where slot i's key starts and ends: origin + i * slot_bytes, plus key_bytes.
  const size_t origin = static_cast<size_t>(static_cast<const char*>(key) - static_cast<const char*>(base_));
  const off_t size = static_cast<off_t>(MappedBytes());
  off_t at = 0;
  while (at < size) {
    const off_t data = lseek(fd_, at, SEEK_DATA);
    if (data < 0 && errno == ENXIO) break;  // no page after `at`
    const off_t hole = data < 0 ? size : lseek(fd_, data, SEEK_HOLE);
    const size_t start = static_cast<size_t>(data < 0 ? at : data), end = static_cast<size_t>(hole < 0 ? size : hole);
    // Slots whose key overlaps [start, end): origin + i * slot_bytes < end and its end > start.
    if (end > origin) {
      const size_t from = start >= origin + key_bytes ? (start - origin - key_bytes) / slot_bytes + 1 : 0;
      const size_t to = std::min<size_t>(count, (end - origin + slot_bytes - 1) / slot_bytes);
      for (size_t i = from; i < to; i++) written[i] = true;
    }
    if (data < 0 || hole < 0) break;
    at = hole;
  }
  return written;
}

std::vector<bool> InFlightJournal::NotificationsInUse() const {
  return WrittenSlots(&notifications_[0].state, sizeof notifications_[0].state, sizeof(NotificationSlot), kNotificationSlots);
}

std::vector<bool> InFlightJournal::ContainersInUse() const {
  return WrittenSlots(&containers_[0].handle, sizeof containers_[0].handle, sizeof(ContainerSlot), kContainerSlots);
}

// Free slots are popped from the back: the lowest first, so few pages are ever touched.
void InFlightJournal::RebuildFreeLists() {
  const std::vector<bool> notifications = NotificationsInUse();
  const std::vector<bool> containers = ContainersInUse();
  std::lock_guard<std::mutex> lock(mu_);
  free_notifications_.clear();
  free_containers_.clear();
  for (uint32_t i = kNotificationSlots; i-- > 0;) {
    if (!notifications[i] || notifications_[i].state.load(std::memory_order_acquire) == 0) free_notifications_.push_back(i);
  }
  for (uint32_t i = kContainerSlots; i-- > 0;) {
    if (!containers[i] || containers_[i].handle.load(std::memory_order_acquire) == 0) free_containers_.push_back(i);
  }
}

uint32_t InFlightJournal::PopFree(std::vector<uint32_t>* free_slots) {
  if (detached_.load(std::memory_order_acquire)) return kNoSlot;
  std::lock_guard<std::mutex> lock(mu_);
  if (free_slots->empty()) return kNoSlot;
  uint32_t slot = free_slots->back();
  free_slots->pop_back();
  return slot;
}

uint32_t InFlightJournal::AddInFlight(const InFlight& n) {
  uint32_t slot = PopFree(&free_notifications_);
  if (slot != kNoSlot) Fill(slot, n);
  return slot;
}

void InFlightJournal::Fill(uint32_t slot, const InFlight& n) {
  if (detached_.load(std::memory_order_acquire)) return;
  NotificationSlot& s = notifications_[slot];
  s.id.store(n.id, std::memory_order_relaxed);
  s.handle.store(n.handle, std::memory_order_relaxed);
  s.pid = n.pid;
  s.nr = n.nr;
  s.arch = n.arch;
  s.ip = n.ip;
  for (int i = 0; i < 6; i++) s.args[i] = n.args[i];
  __atomic_store_n(&s.helper_mark, 0u, __ATOMIC_RELAXED);
  s.state.store(1, std::memory_order_release);
}

void InFlightJournal::CloseReceipt(uint32_t slot) {
  if (slot == kNoSlot || detached_.load(std::memory_order_acquire)) return;
  notifications_[slot].state.store(0, std::memory_order_release);
}

void InFlightJournal::MarkWithHelper(uint32_t slot, uint64_t id) {
  if (slot == kNoSlot || detached_.load(std::memory_order_acquire)) return;
  __atomic_store_n(&notifications_[slot].helper_mark, HelperMark(id), __ATOMIC_RELEASE);
}

void InFlightJournal::ReleaseInFlight(uint32_t slot) {
  if (slot == kNoSlot || detached_.load(std::memory_order_acquire)) return;
  notifications_[slot].state.store(0, std::memory_order_release);
  std::lock_guard<std::mutex> lock(mu_);
  free_notifications_.push_back(slot);
}

std::vector<InFlightJournal::Entry> InFlightJournal::InFlightEntries() const {
  std::vector<Entry> entries;
  const std::vector<bool> written = NotificationsInUse();
  for (uint32_t i = 0; i < kNotificationSlots; i++) {
    if (!written[i]) continue;
    const NotificationSlot& s = notifications_[i];
    if (s.state.load(std::memory_order_acquire) != 1) continue;
    InFlight n;
    n.handle = s.handle.load(std::memory_order_relaxed);
    n.id = s.id.load(std::memory_order_relaxed);
    n.pid = s.pid;
    n.nr = s.nr;
    n.arch = s.arch;
    n.ip = s.ip;
    for (int i = 0; i < 6; i++) n.args[i] = s.args[i];
    entries.push_back(Entry{n, __atomic_load_n(&s.helper_mark, __ATOMIC_ACQUIRE) == HelperMark(n.id)});
  }
  return entries;
}

void InFlightJournal::ClearInFlight() {
  const std::vector<bool> written = NotificationsInUse();
  for (uint32_t i = 0; i < kNotificationSlots; i++) {
    if (written[i] && notifications_[i].state.load(std::memory_order_relaxed) != 0) notifications_[i].state.store(0, std::memory_order_release);
  }
  RebuildFreeLists();
}

uint32_t InFlightJournal::AddContainer(uint32_t handle) {
  uint32_t slot = PopFree(&free_containers_);
  if (slot == kNoSlot) return kNoSlot;
  ContainerSlot& c = containers_[slot];
  c.has_last.store(0, std::memory_order_relaxed);
  c.last_id.store(0, std::memory_order_relaxed);
  c.handle.store(handle, std::memory_order_release);
  return slot;
}

void InFlightJournal::ReleaseContainer(uint32_t container_slot) {
  if (container_slot == kNoSlot || detached_.load(std::memory_order_acquire)) return;
  containers_[container_slot].handle.store(0, std::memory_order_release);
  std::lock_guard<std::mutex> lock(mu_);
  free_containers_.push_back(container_slot);
}

std::vector<std::pair<uint32_t, InFlightJournal::ContainerMark>> InFlightJournal::ContainerMarks() const {
  std::vector<std::pair<uint32_t, ContainerMark>> marks;
  const std::vector<bool> written = ContainersInUse();
  for (uint32_t i = 0; i < kContainerSlots; i++) {
    if (!written[i]) continue;
    const ContainerSlot& c = containers_[i];
    uint32_t handle = c.handle.load(std::memory_order_acquire);
    if (handle == 0) continue;
    bool has_last = c.has_last.load(std::memory_order_acquire) != 0;
    marks.emplace_back(i, ContainerMark{handle, c.last_id.load(std::memory_order_relaxed), has_last});
  }
  return marks;
}

void InFlightJournal::ReleaseContainersExcept(const std::vector<uint32_t>& kept_slots) {
  std::vector<bool> kept(kContainerSlots, false);
  for (uint32_t slot : kept_slots) {
    if (slot < kContainerSlots) kept[slot] = true;
  }
  const std::vector<bool> written = ContainersInUse();
  for (uint32_t i = 0; i < kContainerSlots; i++) {
    if (written[i] && !kept[i] && containers_[i].handle.load(std::memory_order_relaxed) != 0) {
      containers_[i].handle.store(0, std::memory_order_release);
    }
  }
  RebuildFreeLists();
}

}  // namespace seccomp_agent
