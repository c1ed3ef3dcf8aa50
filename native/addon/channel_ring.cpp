#include "channel_ring.hpp"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <new>

#include "unique_fd.h"

namespace seccomp_agent {

using decision_channel::kRingFileBytes;
using decision_channel::kToControlPlaneBytes;
using decision_channel::kToEngineBytes;

std::unique_ptr<ChannelRing> ChannelRing::Create(int* memfd, std::string* error) {
  Fd fd(memfd_create("seccomp-agent-decision-rings", MFD_CLOEXEC | MFD_ALLOW_SEALING));
  if (fd.get() < 0) {
    *error = std::string("memfd_create: ") + strerror(errno);
    return nullptr;
  }
  // Sealed at its size: a control plane that could shrink it would fault this thread on its next
  // access (SIGBUS), and the data plane with it.
  if (ftruncate(fd.get(), kRingFileBytes) != 0 ||
      fcntl(fd.get(), F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
    *error = std::string("sizing and sealing the ring memfd: ") + strerror(errno);
    return nullptr;
  }
  void* map = mmap(nullptr, kRingFileBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0);
  if (map == MAP_FAILED) {
    *error = std::string("mmap of the ring memfd: ") + strerror(errno);
    return nullptr;
  }
  std::unique_ptr<ChannelRing> ring(new (std::nothrow) ChannelRing());
  if (ring == nullptr) {
    munmap(map, kRingFileBytes);
    *error = "out of memory";
    return nullptr;
  }
  ring->map_ = map;
  auto* header = new (map) decision_channel::RingHeader();
  header->magic = decision_channel::kRingMagic;
  header->to_control_plane_bytes = kToControlPlaneBytes;
  header->to_engine_bytes = kToEngineBytes;
  ring->header_ = header;
  decision_channel::AttachEnds(static_cast<char*>(map), decision_channel::RingSide::kEngine, &ring->out_, &ring->in_);
  *memfd = fd.Release();
  return ring;
}

ChannelRing::~ChannelRing() {
  if (map_ != nullptr) munmap(map_, kRingFileBytes);
}

}  // namespace seccomp_agent
