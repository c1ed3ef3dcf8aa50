// What an entry of the engine's epoll set points to (epoll_event.data.ptr): the engine thread
// dispatches on `kind` without any map lookup.
#pragma once
#include <cstdint>

namespace seccomp_agent {

struct EpollSource {
  enum class Kind : uint8_t { kWake, kListener, kConnection, kContainer, kChannelListener, kChannelConn,
                    kHandoffListener };
  explicit EpollSource(Kind k) : kind(k) {}
  const Kind kind;
};

}  // namespace seccomp_agent
