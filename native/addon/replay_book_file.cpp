#include "replay_book_file.hpp"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace seccomp_agent {
namespace {

std::string ErrnoText(const char* what) { return std::string(what) + ": " + strerror(errno); }

void* Map(int fd, std::string* error) {
  void* base = mmap(nullptr, replay_book::FileBytes(), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (base != MAP_FAILED) return base;
  *error = ErrnoText("mmap of the replay book");
  return nullptr;
}

}  // namespace

std::unique_ptr<ReplayBookFile> ReplayBookFile::Create(std::string* error) {
  int fd = memfd_create("seccomp-agent-replays", MFD_CLOEXEC);
  if (fd < 0) {
    *error = ErrnoText("memfd_create of the replay book");
    return nullptr;
  }
  void* base = nullptr;
  if (ftruncate(fd, static_cast<off_t>(replay_book::FileBytes())) != 0) {
    *error = ErrnoText("ftruncate of the replay book");
  } else {
    base = Map(fd, error);
  }
  if (base == nullptr) {
    close(fd);
    return nullptr;
  }
  replay_book::FillHeader(static_cast<replay_book::Header*>(base));
  return std::unique_ptr<ReplayBookFile>(new ReplayBookFile(fd, base));
}

std::unique_ptr<ReplayBookFile> ReplayBookFile::Open(int fd, std::string* error) {
  struct stat st;
  void* base = nullptr;
  if (fstat(fd, &st) != 0 || static_cast<size_t>(st.st_size) != replay_book::FileBytes()) {
    *error = "the fd named replays is not a replay book of this version";
  } else if ((base = Map(fd, error)) != nullptr && !replay_book::HeaderValid(static_cast<replay_book::Header*>(base))) {
    *error = "the fd named replays has no replay book header of version " + std::to_string(replay_book::kVersion);
    munmap(base, replay_book::FileBytes());
    base = nullptr;
  }
  if (base == nullptr) {
    close(fd);
    return nullptr;
  }
  int flags = fcntl(fd, F_GETFD);
  if (flags >= 0) fcntl(fd, F_SETFD, flags | FD_CLOEXEC);
  return std::unique_ptr<ReplayBookFile>(new ReplayBookFile(fd, base));
}

ReplayBookFile::~ReplayBookFile() {
  munmap(base_, replay_book::FileBytes());
  close(fd_);
}

int ReplayBookFile::Assign(uint64_t key, const std::set<int>& busy, uint64_t now_ns) {
  std::lock_guard<std::mutex> lock(mu_);
  replay_book::Header* h = header();
  int chosen = -1;
  for (uint32_t p = 0; p < replay_book::kPartitions && chosen < 0; p++) {
    if (h->keys[p] == key) chosen = int(p);
  }
  for (uint32_t p = 0; p < replay_book::kPartitions && chosen < 0; p++) {
    if (h->keys[p] == 0) chosen = int(p);
  }
  if (chosen < 0) {
    for (uint32_t p = 0; p < replay_book::kPartitions; p++) {
      if (busy.count(int(p)) != 0) continue;
      if (chosen < 0 || h->used_ns[p] < h->used_ns[chosen]) chosen = int(p);
    }
    if (chosen < 0) return -1;
    // Another namespace's notes: its helpers are gone, and what they kept ends here.
    memset(static_cast<char*>(base_) + replay_book::PartitionOffset(uint32_t(chosen)), 0, replay_book::PartitionBytes());
  }
  h->keys[chosen] = key;
  h->used_ns[chosen] = now_ns;
  return chosen;
}

}  // namespace seccomp_agent
