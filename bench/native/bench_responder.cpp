// seccomp-bench-responder: the bare C reference agent of `npm run bench`.
//
//   seccomp-bench-responder SOCKET_PATH [--idle-threads N] [--polling-threads N] [--own-fd-table] [--no-sync-wake-up]
//
// Accepts runtime connections on SOCKET_PATH the way the data plane does (notify fd by
// SCM_RIGHTS in the first sendmsg, JSON until EOF, `fds` naming "seccompFd") and answers every
// notification of every fd with SECCOMP_USER_NOTIF_FLAG_CONTINUE from one thread: epoll, RECV,
// SEND, nothing else. SYNC_WAKE_UP is turned on as the data plane does, so the two are compared
// on equal kernel terms. Prints {"listening":PATH} once ready and {"answered":N,...} on SIGTERM.
// --idle-threads N adds N threads that only sleep: the process is then multi-threaded, as every
// Node process (the data plane) is, which can make each switch to and from it cost more
// (docs/benchmarks.md, stop 37: +0.13 µs a call on one phase of the bench's VM, nothing on another).
// --polling-threads N adds N threads that busy-poll for the whole run as the agent's threads do
// while decisions are in flight between its planes (a look at a word, then sched_yield): never
// asleep, yielding to any runnable task. They answer nothing; what they cost another container is
// this machine's price of an always-runnable thread (docs/benchmarks.md, stop 43; a context row of
// the bench, not a reference).
// --own-fd-table gives the answering thread a file table of its own (unshare(CLONE_FILES)) after
// the idle threads start: the kernel then takes no reference on each syscall's file (fdget's
// single-user shortcut), as in a single-threaded process. What the multi-threaded cost is made of
// (docs/benchmarks.md, stop 39).
// --no-sync-wake-up leaves SYNC_WAKE_UP off: the kernel wakes answered callers wherever the
// scheduler likes, as the data plane does for a container with many callers at once
// (native/addon/wake_mode.hpp; a context row of the bench, not a reference).
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <string>
#include <vector>

#include "seccomp_compat.h"
#include "unix_socket.h"

namespace {

constexpr size_t kMaxMessage = 1 << 20;  // as the data plane: a runtime message is small
constexpr int kMaxFdsPerMessage = 8;

enum class Kind { kListener, kSignal, kConnection, kNotify };

// What an epoll entry stands for; epoll_data.ptr points at one of these.
struct Source {
  Kind kind;
  int fd;
  std::string message;    // kConnection: JSON so far
  std::vector<int> fds;   // kConnection: fds received so far
};

struct Stats {
  uint64_t answered = 0;
  uint64_t target_gone = 0;
  uint64_t containers = 0;
  uint64_t rejected = 0;
};

int g_epoll = -1;
Stats g_stats;

bool Watch(Source* source, uint32_t events) {
  struct epoll_event ev;
  memset(&ev, 0, sizeof ev);
  ev.events = events;
  ev.data.ptr = source;
  if (epoll_ctl(g_epoll, EPOLL_CTL_ADD, source->fd, &ev) != 0) {
    fprintf(stderr, "seccomp-bench-responder: epoll_ctl add fd %d: %s\n", source->fd, strerror(errno));
    return false;
  }
  return true;
}

void Forget(Source* source) {
  epoll_ctl(g_epoll, EPOLL_CTL_DEL, source->fd, nullptr);
  close(source->fd);
  delete source;
}

bool IsNotifyFd(int fd) {
  char link[64], target[64];
  snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
  const ssize_t n = readlink(link, target, sizeof target - 1);
  if (n < 0) return false;
  target[n] = '\0';
  return strcmp(target, "anon_inode:seccomp notify") == 0;
}

// Index of "seccompFd" in the message's `fds` array, or -1. A scan, not a JSON parser: the
// reference only needs what runc and crun put there.
int SeccompFdIndex(const std::string& json) {
  size_t pos = json.find("\"fds\"");
  if (pos == std::string::npos) return -1;
  pos = json.find('[', pos);
  const size_t end = pos == std::string::npos ? pos : json.find(']', pos);
  if (end == std::string::npos) return -1;
  int index = 0;
  for (size_t at = pos + 1; at < end; at++) {
    if (json[at] != '"') continue;
    const size_t close_quote = json.find('"', at + 1);
    if (close_quote == std::string::npos || close_quote > end) return -1;
    if (json.compare(at + 1, close_quote - at - 1, "seccompFd") == 0) return index;
    index++;
    at = close_quote;
  }
  return -1;
}

bool g_sync_wake_up = true;

void AddNotifyFd(int fd) {
  // Same kernel fast path as the data plane: wake the target on this CPU (6.6+).
  if (g_sync_wake_up && ioctl(fd, SECCOMP_IOCTL_NOTIF_SET_FLAGS, SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP) != 0) {
    fprintf(stderr, "seccomp-bench-responder: NOTIF_SET_FLAGS(SYNC_WAKE_UP): %s (continuing without)\n",
            strerror(errno));
  }
  Source* source = new Source{Kind::kNotify, fd, {}, {}};
  if (!Watch(source, EPOLLIN)) {
    close(fd);
    delete source;
    return;
  }
  g_stats.containers++;
}

// The runtime closed its end: keep the seccomp fd it named, close everything else.
void FinishConnection(Source* conn) {
  const int index = SeccompFdIndex(conn->message);
  int keep = -1;
  if (index >= 0 && static_cast<size_t>(index) < conn->fds.size() && IsNotifyFd(conn->fds[index])) {
    keep = conn->fds[index];
  }
  for (int fd : conn->fds) {
    if (fd != keep) close(fd);
  }
  conn->fds.clear();
  if (keep >= 0) {
    AddNotifyFd(keep);
  } else {
    g_stats.rejected++;
    fprintf(stderr, "seccomp-bench-responder: connection without a seccomp notify fd named seccompFd: closed\n");
  }
  Forget(conn);
}

void ReadConnection(Source* conn) {
  for (;;) {
    char data[16384];
    char control[CMSG_SPACE(sizeof(int) * kMaxFdsPerMessage)];
    struct iovec iov = {data, sizeof data};
    struct msghdr msg;
    memset(&msg, 0, sizeof msg);
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    const ssize_t n = recvmsg(conn->fd, &msg, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    for (struct cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
      if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
      const size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      const int* fds = reinterpret_cast<const int*>(CMSG_DATA(c));
      for (size_t i = 0; i < count; i++) conn->fds.push_back(fds[i]);
    }
    if (n < 0 || (msg.msg_flags & MSG_CTRUNC) != 0 || conn->message.size() + static_cast<size_t>(n) > kMaxMessage) {
      fprintf(stderr, "seccomp-bench-responder: bad runtime connection (%s): closed\n",
              n < 0 ? strerror(errno) : "truncated or too large");
      for (int fd : conn->fds) close(fd);
      g_stats.rejected++;
      Forget(conn);
      return;
    }
    if (n == 0) {
      FinishConnection(conn);
      return;
    }
    conn->message.append(data, static_cast<size_t>(n));
  }
}

void AcceptConnections(Source* listener) {
  for (;;) {
    const int fd = accept4(listener->fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) {
        fprintf(stderr, "seccomp-bench-responder: accept: %s\n", strerror(errno));
      }
      return;
    }
    Source* conn = new Source{Kind::kConnection, fd, {}, {}};
    if (!Watch(conn, EPOLLIN | EPOLLRDHUP)) {
      close(fd);
      delete conn;
    }
  }
}

// One notification: receive it and let the syscall run. Nothing else is on this path.
void Answer(Source* notify) {
  struct seccomp_notif req;
  memset(&req, 0, sizeof req);  // the kernel refuses a buffer that is not zeroed
  if (ioctl(notify->fd, SECCOMP_IOCTL_NOTIF_RECV, &req) != 0) {
    // ENOENT: the caller died between the wake-up and the RECV.
    if (errno != ENOENT && errno != EINTR) {
      fprintf(stderr, "seccomp-bench-responder: NOTIF_RECV: %s\n", strerror(errno));
    }
    return;
  }
  struct seccomp_notif_resp resp;
  memset(&resp, 0, sizeof resp);
  resp.id = req.id;
  resp.flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE;
  if (ioctl(notify->fd, SECCOMP_IOCTL_NOTIF_SEND, &resp) != 0) {
    if (errno == ENOENT) {
      g_stats.target_gone++;  // normal: the target is gone
    } else {
      fprintf(stderr, "seccomp-bench-responder: NOTIF_SEND: %s\n", strerror(errno));
    }
    return;
  }
  g_stats.answered++;
}

// An idle thread: makes the process multi-threaded and does nothing else.
void* SleepForever(void*) {
  for (;;) pause();
  return nullptr;
}

// A polling thread: looks at a word nobody writes, yields the CPU, and again, as the agent's pollers
// look at their rings while decisions are in flight (engine_loop.cpp's AwaitRings, the control
// plane's ChannelConnection.poll).
std::atomic<uint64_t> g_polled_word{0};

void* PollForever(void*) {
  while (g_polled_word.load(std::memory_order_acquire) == 0) sched_yield();
  return nullptr;
}

// Starts `count` threads running `body`; they inherit the blocked SIGTERM/SIGINT, so the main
// thread's signalfd still receives them.
bool StartThreads(long count, void* (*body)(void*)) {
  for (long i = 0; i < count; i++) {
    pthread_t thread;
    const int err = pthread_create(&thread, nullptr, body, nullptr);
    if (err != 0) {
      fprintf(stderr, "seccomp-bench-responder: pthread_create: %s\n", strerror(err));
      return false;
    }
    pthread_detach(thread);
  }
  return true;
}

// The listening socket, made as the data plane makes its own (native/common/unix_socket.h).
int Listen(const char* path) {
  std::string error;
  const int fd = seccomp_agent::ListenUnixSocket(path, 0600, "listener socket", &error);
  if (fd < 0) fprintf(stderr, "seccomp-bench-responder: %s\n", error.c_str());
  return fd;
}

}  // namespace

int main(int argc, char** argv) {
  long idle_threads = 0;
  long polling_threads = 0;
  bool own_fd_table = false;
  bool usage = argc < 2 || argv[1][0] == '-';
  for (int i = 2; i < argc && !usage; i++) {
    if (strcmp(argv[i], "--no-sync-wake-up") == 0) {
      g_sync_wake_up = false;
    } else if (strcmp(argv[i], "--own-fd-table") == 0) {
      own_fd_table = true;
    } else if ((strcmp(argv[i], "--idle-threads") == 0 || strcmp(argv[i], "--polling-threads") == 0) && i + 1 < argc) {
      long* count = strcmp(argv[i], "--idle-threads") == 0 ? &idle_threads : &polling_threads;
      char* end = nullptr;
      const char* value = argv[++i];
      *count = strtol(value, &end, 10);
      usage = *value == '\0' || *end != '\0' || *count < 0 || *count > 64;
    } else {
      usage = true;
    }
  }
  if (usage) {
    fprintf(stderr, "usage: seccomp-bench-responder SOCKET_PATH [--idle-threads N (0..64)] [--polling-threads N (0..64)] [--own-fd-table] [--no-sync-wake-up]\n");
    return 2;
  }
  const char* path = argv[1];
  signal(SIGPIPE, SIG_IGN);
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGINT);
  if (sigprocmask(SIG_BLOCK, &stop, nullptr) != 0) {
    perror("seccomp-bench-responder: sigprocmask");
    return 1;
  }
  if (!StartThreads(idle_threads, SleepForever) || !StartThreads(polling_threads, PollForever)) return 1;
  // Before any fd is made: the table copied here holds only stdio.
  if (own_fd_table && unshare(CLONE_FILES) != 0) {
    perror("seccomp-bench-responder: unshare(CLONE_FILES)");
    return 1;
  }
  const int sfd = signalfd(-1, &stop, SFD_CLOEXEC | SFD_NONBLOCK);
  g_epoll = epoll_create1(EPOLL_CLOEXEC);
  if (sfd < 0 || g_epoll < 0) {
    perror("seccomp-bench-responder: signalfd/epoll_create1");
    return 1;
  }
  const int lfd = Listen(path);
  if (lfd < 0) return 1;
  Source listener{Kind::kListener, lfd, {}, {}};
  Source signals{Kind::kSignal, sfd, {}, {}};
  if (!Watch(&listener, EPOLLIN) || !Watch(&signals, EPOLLIN)) return 1;
  printf("{\"listening\":\"%s\"}\n", path);
  fflush(stdout);

  struct epoll_event events[64];
  for (;;) {
    const int n = epoll_wait(g_epoll, events, 64, -1);
    if (n < 0) {
      if (errno == EINTR) continue;
      perror("seccomp-bench-responder: epoll_wait");
      return 1;
    }
    for (int i = 0; i < n; i++) {
      Source* source = static_cast<Source*>(events[i].data.ptr);
      const uint32_t ev = events[i].events;
      switch (source->kind) {
        case Kind::kListener:
          AcceptConnections(source);
          break;
        case Kind::kSignal:
          unlink(path);
          printf("{\"answered\":%llu,\"targetGone\":%llu,\"containers\":%llu,\"rejected\":%llu}\n",
                 static_cast<unsigned long long>(g_stats.answered),
                 static_cast<unsigned long long>(g_stats.target_gone),
                 static_cast<unsigned long long>(g_stats.containers),
                 static_cast<unsigned long long>(g_stats.rejected));
          fflush(stdout);
          return 0;
        case Kind::kConnection:
          ReadConnection(source);
          break;
        case Kind::kNotify:
          // Readable means a notification waits; HUP alone means the filter has no task left.
          if (ev & EPOLLIN) {
            Answer(source);
          } else if (ev & (EPOLLHUP | EPOLLERR)) {
            Forget(source);
          }
          break;
      }
    }
  }
}
