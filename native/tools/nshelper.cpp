// seccomp-nshelper: does mkdir and mount on behalf of a container's process, as that process
// would, confined to its root. Started by the data plane (native/addon/nshelper_pool.cpp) with a
// SOCK_SEQPACKET socket as fd 3 and its reply ring as fd 4; protocol in
// native/common/nshelper_protocol.h.
//
//   seccomp-nshelper [--busy-poll-us=N]  serve requests until the socket closes (kept helper);
//                              after answering one, poll N µs for the next before sleeping (the
//                              pool is rung for the responses of targets it answered every few
//                              of them, or when it sleeps)
//   seccomp-nshelper --once    serve one request, then exit (the spawn-per-call variant)
//
// Why a process: the work switches fsuid/fsgid, groups, capabilities, umask and root, which must
// not leak into the data plane's threads, and a request that hangs (a FUSE or NFS mount in the
// container) must be killable: a process can be SIGKILLed, a thread cannot.
//
// The helper itself never enters the container's mount namespace: /proc/<pid>/root is a path in
// the target's mount tree, so lookups from it see the container's own mounts, and a helper that
// stayed inside would pin that namespace (and every mount in it) after the container is gone.
// A mount, which must happen inside, is done by a forked child that enters the namespaces.
// docs/emulation.md explains the resolution algorithm and the checks.
//
// This file is the request loop (receive, handle, answer, reply) and main; the jobs it runs are
// nshelper_resolve (paths inside the target's root), nshelper_mkdir and nshelper_mount.
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <string>

#include "command_line.h"
#include "monotonic_clock.h"
#include "mount_confinement.hpp"
#include "notify_fd.hpp"
#include "nshelper_answer.hpp"
#include "nshelper_credentials.hpp"
#include "nshelper_mkdir.hpp"
#include "nshelper_mount.hpp"
#include "nshelper_outcome.hpp"
#include "nshelper_target.hpp"
#include "nshelper_protocol.h"
#include "nshelper_recovery.hpp"
#include "nshelper_replay.hpp"
#include "replay_book.h"
#include "nshelper_state.hpp"
#include "seccomp_compat.h"

namespace nshelper {

TargetCache g_targets;
ReplayBook g_replays;
int g_host_root = -1;

}  // namespace nshelper

namespace {

using nshelper::Request;
using nshelper::Response;

using nshelper::Credentials;
using nshelper::Delivery;
using nshelper::Fail;
using nshelper::Outcome;
using nshelper::Status;
using nshelper::Target;

using nshelper::DoMkdir;
using nshelper::DoMount;
using nshelper::g_host_root;
using nshelper::g_replays;
using nshelper::g_targets;

pid_t g_parent = 0;  // the data plane that started us (getppid at start)
// Kept helper: poll this long after an answer for the next request (a burst of mkdirs then costs
// no wake-up of this process each, which on a VM is most of a request's time: docs/benchmarks.md).
uint64_t g_busy_poll_ns = 0;
uint64_t g_answered_ns = 0;  // when the last request was answered
// Between requests that follow one another within the busy poll (a burst), the helper stays as a
// request leaves it: its death signal off and its replay book partition locked. Both are set back
// once, when it goes idle (ServeOne, before its blocking receive), not around each request: four
// syscalls fewer per request.
bool g_in_burst = false;
// Responses go into the ring shared with the pool (nshelper_protocol.h); the socket only rings.
// A doorbell per response woke the data plane's pool thread once per call, just as the target made
// its next one, on the vCPUs its engine thread and this helper need for it (docs/benchmarks.md,
// stops 33 and 34); a response nobody waits for is rung for in batches instead. The pool takes
// whatever is posted before it calls a request late, so a request that hangs strands none.
nshelper::ReplyRing* g_replies = nullptr;
uint32_t g_unrung = 0;  // responses posted since the last doorbell

// False when the socket is broken (the data plane is gone).
bool RingDoorbell() {
  g_unrung = 0;
  const nshelper::Doorbell bell = {nshelper::kDoorbellMagic};
  ssize_t w;
  do {
    w = send(nshelper::kSocketFd, &bell, sizeof(bell), MSG_NOSIGNAL);
  } while (w < 0 && errno == EINTR);
  return w == ssize_t(sizeof(bell));
}

bool RingIfPosted() { return g_unrung == 0 || RingDoorbell(); }

// Posts one response; rings now unless `may_wait` and fewer than kDoorbellEvery are unrung. False
// when the pool is gone or out of step (more unread than it ever has in hand: we exit, it retries).
bool PostReply(const nshelper::Response& resp, bool may_wait) {
  const uint32_t head = g_replies->head.load(std::memory_order_relaxed);
  if (head - g_replies->tail.load(std::memory_order_acquire) >= nshelper::kReplySlots) {
    fprintf(stderr, "seccomp-nshelper: the reply ring is full (the data plane reads none): exiting\n");
    return false;
  }
  g_replies->slots[head % nshelper::kReplySlots] = resp;
  g_replies->head.store(head + 1, std::memory_order_release);
  ++g_unrung;
  if (may_wait && g_unrung < nshelper::kDoorbellEvery) return true;
  return RingDoorbell();
}

// The ring at kRepliesFd, mapped; the descriptor closed. Null (errno set) when it is not one.
nshelper::ReplyRing* MapReplies() {
  struct stat st;
  if (fstat(nshelper::kRepliesFd, &st) != 0) return nullptr;
  if (size_t(st.st_size) < sizeof(nshelper::ReplyRing)) {
    errno = EINVAL;
    return nullptr;
  }
  void* base = mmap(nullptr, sizeof(nshelper::ReplyRing), PROT_READ | PROT_WRITE, MAP_SHARED, nshelper::kRepliesFd, 0);
  close(nshelper::kRepliesFd);
  return base == MAP_FAILED ? nullptr : static_cast<nshelper::ReplyRing*>(base);
}

// ---------------------------------------------------------------------------------------------
// The request loop.

bool ParseRequest(const char* buf, ssize_t n, Request* req, std::string* str) {
  if (n < ssize_t(sizeof(Request))) return false;
  memcpy(req, buf, sizeof(Request));
  if (req->magic != nshelper::kMagic || req->version != nshelper::kVersion) return false;
  size_t off = sizeof(Request);
  for (int i = 0; i < 4; ++i) {
    if (req->len[i] > nshelper::kMaxString || off + req->len[i] > size_t(n)) return false;
    str[i].assign(buf + off, req->len[i]);
    if (str[i].find('\0') != std::string::npos) return false;
    off += req->len[i];
  }
  return off == size_t(n);
}

// `t` is the caller's, so that its root fd is closed after the answer, not on the target's path.
Status Handle(const Request& req, const std::string* str, int notify_fd, Target& t, Outcome* out) {
  if (req.op == nshelper::kOpPing) return {};
  Status s = g_targets.Open(req, notify_fd, &t);
  if (!s.ok()) return s;
  // A call a signal may have restarted after a request for it acted (Open has just checked this
  // notification is pending, from this very task): a mount's outcome is given again here, a
  // mkdir's where it would act, once its directory is seen still in place.
  if (req.nr != 0 && g_replays.enabled() && (req.op == nshelper::kOpMkdir || req.op == nshelper::kOpMount)) {
    out->strings_hash = nshelper::ReplayBook::Hash(str);
    out->task_ino = g_targets.TaskIno(t);
    out->candidate = g_replays.Find(req, out->strings_hash, out->task_ino, MonotonicNs());
    out->stdin_info = g_targets.StdinInfo(t);
    out->pidfd = g_targets.ThreadPidfd(t);
    if (req.op == nshelper::kOpMount && out->candidate.index >= 0 &&
        out->candidate.entry.state != replay_book::kIntent) {
      out->entry = out->candidate.index;
      out->replay = true;
      return {};
    }
  }
  switch (req.op) {
    case nshelper::kOpMkdir:
      return DoMkdir(req, str[0], t, out);
    case nshelper::kOpMount:
      return DoMount(req, str, t, out);
    default:
      return Fail(nshelper::kStageBadRequest, EINVAL);
  }
}

// Receives one request; returns false on EOF or a broken socket (the data plane is gone).
bool ServeOne(char* buf) {
  msghdr msg = {};
  iovec iov = {buf, nshelper::kMaxRequestBytes};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * 4)];
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  ssize_t n = -1;
  bool polled = false;  // the poll got a request, or an error that ends us
  const uint64_t poll_until = g_answered_ns + g_busy_poll_ns;
  while (!polled && g_busy_poll_ns != 0 && MonotonicNs() < poll_until) {
    n = recvmsg(nshelper::kSocketFd, &msg, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
    polled = n >= 0 || (errno != EAGAIN && errno != EINTR);
    // A poll is for an idle CPU: another task that is runnable here (a container's thread, an
    // engine lane) runs first rather than waiting out our spin.
    if (!polled) sched_yield();
  }
  if (!polled) {
    if (!RingIfPosted()) return false;
    // Idle: the partition is another helper's to take, and the data plane's death is ours again.
    if (g_in_burst) {
      g_in_burst = false;
      g_replays.Unlock();
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != g_parent) return false;
    }
    do {
      n = recvmsg(nshelper::kSocketFd, &msg, MSG_CMSG_CLOEXEC);
    } while (n < 0 && errno == EINTR);
  }
  if (n <= 0) return false;
  if (!g_in_burst) {
    // A request in hand is carried to its end, the target answered, even if the data plane dies
    // meanwhile: killed between its mkdir and the answer, the successor would replay the still
    // pending notification and do it again (EEXIST for a mkdir that was made). The data plane's
    // death is looked at once this one is answered.
    prctl(PR_SET_PDEATHSIG, 0);
    // The partition's lock for the whole burst: a helper of a dead data plane still finishing one
    // for this namespace has noted what it did before we look (replay_book.h).
    g_replays.Lock();
    g_in_burst = true;
  }
  uint64_t start = MonotonicNs();

  int fds[4];
  int nfds = 0;
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < count && nfds < 4; ++i) memcpy(&fds[nfds++], CMSG_DATA(c) + i * sizeof(int), sizeof(int));
  }

  Request req;
  std::string str[4];
  Response resp = {};
  resp.magic = nshelper::kMagic;
  resp.version = nshelper::kVersion;
  Status s;
  Outcome outcome;
  Target target;  // its fds, and the outcome's, close once the target has its answer
  bool parsed = !(msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) && ParseRequest(buf, n, &req, str);
  if (!parsed) {
    memset(&req, 0, sizeof(req));
    if (n >= ssize_t(sizeof(Request))) memcpy(&req.tag, buf + offsetof(Request, tag), sizeof(req.tag));
    s = Fail(nshelper::kStageBadRequest, EINVAL);
  } else {
    s = Handle(req, str, nfds > 0 ? fds[0] : -1, target, &outcome);
  }
  resp.tag = req.tag;
  resp.err = s.err;
  resp.stage = s.stage;
  if (outcome.replay) resp.flags |= nshelper::kReplayed;
  if (outcome.wait_state == 'D') resp.flags |= nshelper::kTargetWaitKillable;
  if (outcome.wait_state == 'S') resp.flags |= nshelper::kTargetWaitInterruptible;
  // Answer the target ourselves when asked, unless the notification is gone or was never
  // checked: a stale id must get no answer from us, and a bad request is the data plane's to answer.
  bool kept = false;  // the request's entry stays in the book
  bool answered_here = false;
  if (parsed && (req.flags & nshelper::kRespond) && nfds > 0 && s.stage != nshelper::kStageStale &&
      s.stage != nshelper::kStageBadRequest && s.stage != nshelper::kStageOpenProc) {
    answered_here = true;
    // An effect's answer (an entry of its own or replayed) is one whose delivery is known
    // (nshelper_answer.hpp); the kept outcome then serves the call a signal restarts, and only it.
    const bool effect = s.ok() && outcome.entry >= 0;
    Delivery delivery = Delivery::kFailed;
    int send_err = 0;
    if (effect) {
      delivery = nshelper::AnswerZero(fds[0], req.notif_id, outcome.stdin_info, outcome.pidfd, &send_err);
    } else {
      delivery = seccomp_agent::NotifySendErrno(fds[0], req.notif_id, s.err, &send_err) ? Delivery::kSent : Delivery::kFailed;
    }
    if (delivery == Delivery::kTaken || delivery == Delivery::kSent) {
      resp.flags |= nshelper::kAnswered;
    } else {
      resp.send_err = send_err;
    }
    // Kept: an outcome the target left its wait without (a signal took it out; a fatal one too, but
    // then no call comes back), and one whose delivery is unknown (briefly: kDeliveredKeepNs).
    // Taken: the program has its result, and the same call made again is its own (EEXIST).
    kept = effect && (delivery == Delivery::kDropped || delivery == Delivery::kSent);
    if (kept) g_replays.Settle(outcome.entry, delivery == Delivery::kSent, MonotonicNs());
  }
  // Nothing done, or an outcome its target has: no intent, mark or note of it is left behind. An
  // earlier request's entry given again without an answer from here stays as it was.
  if (!kept && (answered_here || !(outcome.replay && outcome.entry == outcome.candidate.index))) {
    g_replays.Erase(outcome.entry);
  }
  for (int i = 0; i < nfds; ++i) close(fds[i]);
  resp.helper_ns = MonotonicNs() - start;
  const bool sent = PostReply(resp, answered_here && (req.flags & nshelper::kReplyMayWait) && g_busy_poll_ns != 0);
  g_answered_ns = MonotonicNs();
  if (getppid() != g_parent) return false;  // it died while this request ran: nothing more to serve
  return sent;
}

// `--once`, `--busy-poll-us=N` (N decimal, at most 1 s), `--book-partition=N` (the replay book at
// fd 5), `--request-timeout-ms=N` (the pool's: how long a dead helper's intent can matter),
// `--nice=N` (0 to 19: the helper's CPU priority, see main). False: a usage error.
bool ParseArgs(int argc, char** argv, bool* once, int* book_partition, uint64_t* request_timeout_ns, int* nice) {
  command_line::Args args(argc, argv);
  while (args.Next()) {
    long long value = 0;
    if (args.Is("--once")) {
      *once = true;
    } else if (command_line::ParseDecimal(args.Inline("--busy-poll-us"), 0, 1000000, &value)) {
      g_busy_poll_ns = uint64_t(value) * 1000;
    } else if (command_line::ParseDecimal(args.Inline("--book-partition"), 0, replay_book::kPartitions - 1, &value)) {
      *book_partition = int(value);
    } else if (command_line::ParseDecimal(args.Inline("--request-timeout-ms"), 0, 3600000, &value)) {
      *request_timeout_ns = uint64_t(value) * 1000000ull;
    } else if (command_line::ParseDecimal(args.Inline("--nice"), 0, 19, &value)) {
      *nice = int(value);
    } else {
      return false;
    }
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  bool once = false;
  int book_partition = -1;
  uint64_t request_timeout_ns = 10000ull * 1000000ull;  // the pool's default
  int nice = 0;
  if (!ParseArgs(argc, argv, &once, &book_partition, &request_timeout_ns, &nice)) {
    fprintf(stderr, "usage: seccomp-nshelper [--once] [--busy-poll-us=N] [--book-partition=N] [--request-timeout-ms=N] [--nice=N]  (started by the seccomp data plane, socket on fd 3, reply ring on fd 4, replay book on fd 5)\n");
    return 2;
  }
  // The helper's work is a container's: when the CPUs are busy, the notifications of every other
  // container (the data plane's lanes, their workloads) run before it, so that a neighbour's
  // flood of emulated calls slows that neighbour, not the others (docs/emulation.md). Only ever
  // lowered: a data plane an operator started at a higher nice keeps its helpers there too.
  errno = 0;
  const int inherited = getpriority(PRIO_PROCESS, 0);
  if (errno == 0 && inherited < nice && setpriority(PRIO_PROCESS, 0, nice) != 0) {
    perror("seccomp-nshelper: setpriority (serving at the data plane's priority)");
  }
  int type = 0;
  socklen_t len = sizeof(type);
  if (getsockopt(nshelper::kSocketFd, SOL_SOCKET, SO_TYPE, &type, &len) != 0 || type != SOCK_SEQPACKET) {
    fprintf(stderr, "seccomp-nshelper: fd 3 is not a SOCK_SEQPACKET socket; it is started by the data plane only\n");
    return 2;
  }
  // Die with the data plane's thread that started us (between requests: see ServeOne); the
  // socket's EOF covers the rest.
  g_parent = getppid();
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  prctl(PR_SET_DUMPABLE, 0);
  // Nothing inherited past the replay book (fd 5); then the ring and the book, each mapped and its
  // fd closed (the book keeps a descriptor of its own, opened here: after this close, not before).
  syscall(SYS_close_range, replay_book::kBookFd + 1, ~0u, 0);
  g_replies = MapReplies();
  if (g_replies == nullptr) {
    perror("seccomp-nshelper: the reply ring on fd 4");
    return 1;
  }
  if (book_partition >= 0 && !g_replays.Open(uint32_t(book_partition), request_timeout_ns)) {
    perror("seccomp-nshelper: the replay book on fd 5 (serving without it: restarted calls are done again)");
  }
  signal(SIGPIPE, SIG_IGN);
  if (!g_targets.Init()) {
    perror("seccomp-nshelper: /proc");
    return 1;
  }
  g_host_root = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (g_host_root < 0 || fchdir(g_host_root) != 0) {
    perror("seccomp-nshelper: /");
    return 1;
  }
  if (!nshelper::TakeOwnCredentials()) {
    perror("seccomp-nshelper: its own credentials (fsuid 0, no groups, capabilities)");
    return 1;
  }
  if (once) g_busy_poll_ns = 0;  // one request: nothing to poll for, its reply goes at once
  static char buf[nshelper::kMaxRequestBytes];
  do {
    if (!ServeOne(buf)) break;
  } while (!once);
  return 0;
}
