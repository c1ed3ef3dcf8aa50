// Lanes 1.. serve with a file table of their own. While other threads share a task's file table,
// every syscall that names an fd takes a reference on its file and drops it on return (fdget skips
// both only for a task alone with its table): three a notification (epoll_wait, RECV, SEND), 0.2 to
// 0.3 µs of a 5.4 µs round trip (docs/benchmarks.md, stop 39). So a lane's thread, as it starts,
// unshares its table (the memory stays shared) and keeps in it only
//   - what lives as long as the engine and was made before any lane ran: every lane's epoll set,
//     wake eventfd and timerfd, this process's pidfd, libuv's async fds (the event queue's
//     thread-safe function writes them), stdin, stdout and stderr;
//   - a copy of the notify fd of each container it serves, at the number the fd has in the shared
//     table (a "mirror"): every number a lane shares with another thread (the epoll set's keys, the
//     read watch's fd, a container's fd in any message) then names the same file in both tables.
// A mirror lives exactly as long as the lane serves its container: made before the fd joins the
// lane's epoll set (Adopt; or kept from the shared table as the thread starts), closed as it leaves
// (LetGo). A copy left behind would keep the filter's listener open: the container's tasks would
// wait where they must fail with ENOSYS once the engine closed its fd. New containers come to such a
// lane by message (kAdopt), never by an epoll_ctl of the JS thread: an fd in the set without its
// mirror could not even be taken out of it (EPOLL_CTL_DEL names the fd in the caller's table).
// What such a lane must not do: make an fd for another thread. The executors dup the notify fd
// they are handed on the caller's thread, and the helper pool sends a helper its requests from
// there: an emulation rule's notification goes to lane 0 with its container (kVisit, rules_again).
// Left as it is: a lane's thread stuck in a read of a task's memory (engine_read_watch.cpp) keeps
// its table, and the mirrors in it, until that read returns; its lane's new thread starts anew.
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <uv.h>

#include <algorithm>

#include "engine.hpp"
#include "engine_names.hpp"

namespace seccomp_agent {
namespace {

int CloseRange(unsigned first, unsigned last) { return static_cast<int>(syscall(SYS_close_range, first, last, 0)); }

// Closes every fd of the calling thread's table but `kept` (sorted, unique).
bool CloseAllBut(const std::vector<int>& kept) {
  unsigned next = 0;
  bool ok = true;
  for (int fd : kept) {
    const unsigned f = static_cast<unsigned>(fd);
    if (f > next) ok = CloseRange(next, f - 1) == 0 && ok;
    next = f + 1;
  }
  return CloseRange(next, ~0U) == 0 && ok;
}

}  // namespace

// JS thread (Init).
void Engine::PrepareFdTables(Napi::Env env) {
  if (!options_.lane_fd_tables || lanes_.size() < 2) return;
  // close_range (5.9) and pidfd_getfd (5.6): without them lanes share the table, as before.
  if (CloseRange(~0U, ~0U) != 0) {
    queue_->PushError("close_range: " + ErrnoText(errno) +
                      "; engine threads share the process's file table (a reference taken on each fd a syscall names)");
    return;
  }
  self_pidfd_ = static_cast<int>(syscall(SYS_pidfd_open, getpid(), 0));
  if (self_pidfd_ < 0) {
    queue_->PushError("pidfd_open of this process: " + ErrnoText(errno) + "; engine threads share the process's file table");
    return;
  }
  // stdio: Node opens /dev/null on any of 0-2 it found closed, so no container's fd takes them.
  kept_fds_ = {0, 1, 2, self_pidfd_};
  for (const auto& lane : lanes_) {
    kept_fds_.insert(kept_fds_.end(), {lane->epoll_fd, lane->wake_fd, lane->timer_fd});
  }
  uv_loop_t* loop = nullptr;
  if (napi_get_uv_event_loop(env, &loop) != napi_ok || loop == nullptr) {
    queue_->PushError("napi_get_uv_event_loop failed; engine threads share the process's file table");
    return;
  }
  // What uv_async_send writes (an eventfd on Linux; a pipe's write end where there is none).
  kept_fds_.push_back(loop->async_io_watcher.fd);
  if (loop->async_wfd >= 0) kept_fds_.push_back(loop->async_wfd);
  std::sort(kept_fds_.begin(), kept_fds_.end());
  kept_fds_.erase(std::unique(kept_fds_.begin(), kept_fds_.end()), kept_fds_.end());
  kept_fds_.erase(std::remove_if(kept_fds_.begin(), kept_fds_.end(), [](int fd) { return fd < 0; }), kept_fds_.end());
  fd_tables_ = true;
}

// A lane's thread as it starts (its first or one the read watch gave it), lanes 1.. only. Under
// mu_: the JS thread adds containers under it (AddContainer), and seeing the token it sends them
// (kAdopt) instead of adding them to the lane's epoll set.
void Engine::TakeOwnFdTable(Lane* lane) {
  if (!fd_tables_) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (unshare(CLONE_FILES) != 0) {
    lane->table_token.store(0, std::memory_order_relaxed);
    queue_->PushError("unshare(CLONE_FILES) on engine thread " + std::to_string(lane->index) + ": " + ErrnoText(errno) +
                      "; it serves with the process's file table");
    return;
  }
  // The containers its epoll set holds now (their fds are in the copy, at their numbers), or that
  // a read taken over holds out of it: their mirrors are made by keeping them.
  std::vector<int> kept = kept_fds_;
  std::vector<Container*> served;
  for (const auto& entry : containers_) {
    Container* container = entry.second.get();
    if (container->lane.load(std::memory_order_relaxed) != lane) continue;
    served.push_back(container);
    kept.push_back(container->fd);
  }
  std::sort(kept.begin(), kept.end());
  kept.erase(std::unique(kept.begin(), kept.end()), kept.end());
  if (!CloseAllBut(kept)) {
    // Not expected (close_range was probed); what stays open only lives longer than it should.
    queue_->PushError("close_range on engine thread " + std::to_string(lane->index) + "'s own file table: " + ErrnoText(errno));
  }
  const uint64_t token = next_table_token_.fetch_add(1, std::memory_order_relaxed);
  for (Container* container : served) container->mirror_token = token;
  lane->table_token.store(token, std::memory_order_relaxed);
}

// The lane's thread: a copy of the container's fd at its own number. That number is free in the
// lane's table (its other fds are open at their numbers in the shared table, where this fd is);
// checked all the same, since a dup3 onto a number in use would close what holds it.
bool Engine::MirrorFd(Lane* lane, Container* container) {
  const int fd = container->fd;
  if (fcntl(fd, F_GETFD) >= 0) {
    errno = EEXIST;
    return false;
  }
  const int copy = static_cast<int>(syscall(SYS_pidfd_getfd, self_pidfd_, fd, 0));  // O_CLOEXEC
  if (copy < 0) return false;
  if (copy != fd) {
    const int placed = dup3(copy, fd, O_CLOEXEC);
    const int err = errno;
    close(copy);
    if (placed < 0) {
      errno = err;
      return false;
    }
  }
  container->mirror_token = lane->table_token.load(std::memory_order_relaxed);
  return true;
}

// The lane taking `container`.
bool Engine::Adopt(Lane* lane, Container* container, Handover* handover, bool* forwarded) {
  *forwarded = false;
  const uint64_t token = lane->table_token.load(std::memory_order_relaxed);
  if (token != 0 && container->mirror_token != token && !MirrorFd(lane, container)) {
    if (!mirror_error_reported_.exchange(true)) {
      queue_->PushError("copying container " + std::to_string(container->handle) + "'s notify fd into engine thread " +
                        std::to_string(lane->index) + "'s file table failed (" + ErrnoText(errno) +
                        "); the engine thread 0 serves it, and any other whose copy fails (said once)");
    }
    handover->rehome = true;
    container->lane.store(nullptr, std::memory_order_release);
    Send(primary_, std::move(*handover));
    *forwarded = true;
    return true;
  }
  return Serve(lane, container);
}

// The lane letting `container` go, out of its epoll set already.
void Engine::DropMirror(Lane* lane, Container* container) {
  const uint64_t token = lane->table_token.load(std::memory_order_relaxed);
  if (token == 0 || container->mirror_token != token) return;
  close(container->fd);  // the lane's copy: the shared table's stays
  container->mirror_token = 0;
}

}  // namespace seccomp_agent
