// What an entry of the engine's epoll set points to (epoll_event.data.ptr): the engine thread
// dispatches on `kind` without any map lookup.
#pragma once
#include <string.h>
#include <sys/epoll.h>

#include <cstdint>

namespace seccomp_agent {

struct EpollSource {
  enum class Kind : uint8_t { kWake, kListener, kConnection, kContainer, kChannelListener, kChannelConn,
                    kHandoffListener, kTimer };
  explicit EpollSource(Kind k) : kind(k) {}
  const Kind kind;
};

// epoll_ctl(op) of fd with `source` as its data (the engine thread dispatches on source->kind)
// and `events` (0: watched for nothing, a paused listener). Returns epoll_ctl's result.
inline int EpollControl(int epoll_fd, int op, int fd, EpollSource* source, uint32_t events) {
  struct epoll_event ev;
  memset(&ev, 0, sizeof ev);
  ev.events = events;
  ev.data.ptr = source;
  return epoll_ctl(epoll_fd, op, fd, &ev);
}

}  // namespace seccomp_agent
