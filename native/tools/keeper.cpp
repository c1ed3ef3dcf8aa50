// seccomp-keeper: the data plane container's first process in a pod, where no systemd holds the
// file descriptor store. It speaks systemd's side of the protocol (native/common/fd_store.h):
// keeps the fds its child sends with FDSTORE=1, and when the child dies without handing over,
// starts it again with every kept fd as LISTEN_FDS, so a SIGKILL of the data plane never closes
// the last copy of a notify fd or of the listener socket.
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <dirent.h>
#include <time.h>
#include <unistd.h>

#include <initializer_list>
#include <string>
#include <vector>

#include "command_line.h"
#include "fd_store.h"
#include "monotonic_clock.h"
#include "json_string.h"

namespace {

using seccomp_agent::fd_store::IsValidName;
using seccomp_agent::fd_store::kListenFdsStart;
using seccomp_agent::fd_store::kMaxFdsPerMessage;
using seccomp_agent::fd_store::kMaxMessageBytes;

const char kUsage[] =
    "usage: seccomp-keeper [--restart-delay-ms N] [--max-fds N] [--socket-dir DIR] -- COMMAND [ARGS...]\n"
    "\n"
    "Runs COMMAND as its child and holds the fds the child stores through the systemd file\n"
    "descriptor store protocol ($NOTIFY_SOCKET, FDSTORE=1, FDNAME=, FDSTOREREMOVE=1). When the\n"
    "child dies without handing over (STOPPING=1 then exit 0) it is started again with every kept\n"
    "fd passed as LISTEN_FDS/LISTEN_FDNAMES. The child finds the keeper's pid in SECCOMP_KEEPER_PID.\n"
    "SIGTERM and SIGINT are forwarded to the child; the keeper then exits with the child's status.\n"
    "\n"
    "  --restart-delay-ms N  wait before a restart (default 200); doubles for each crash within\n"
    "                        10 s of a start, up to 5 s\n"
    "  --max-fds N           most fds kept at once (default 16384); more are closed and logged\n"
    "  --socket-dir DIR      where the store's socket is bound (default /run/seccomp-keeper): created\n"
    "                        0700; refused when not root's, group/world writable, or a symlink\n"
    "  -h, --help            this text\n";

constexpr long long kQuickCrashMs = 10'000;
constexpr long long kMaxRestartDelayMs = 5'000;

// ---------------------------------------------------------------------------------------------
// Logs: one JSON line per event on stderr, shaped like the agent's pino logs.


struct Field {
  Field(const char* k, long long v) : key(k), json(std::to_string(v)) {}
  Field(const char* k, const std::string& v) : key(k), json(JsonString(v)) {}
  Field(const char* k, bool v) : key(k), json(v ? "true" : "false") {}
  const char* key;
  std::string json;
};

enum Level { kInfo = 30, kWarn = 40, kError = 50 };

void Log(Level level, const std::string& msg, std::initializer_list<Field> fields = {}) {
  long long ms = static_cast<long long>(ClockNs(CLOCK_REALTIME) / 1'000'000);
  char host[256] = "";
  if (gethostname(host, sizeof(host) - 1) != 0) host[0] = '\0';
  std::string line = "{\"level\":" + std::to_string(int(level)) + ",\"time\":" + std::to_string(ms) +
                     ",\"pid\":" + std::to_string(getpid()) + ",\"hostname\":" + JsonString(host) +
                     ",\"name\":\"seccomp-keeper\"";
  for (const Field& f : fields) line += std::string(",\"") + f.key + "\":" + f.json;
  line += ",\"msg\":" + JsonString(msg) + "}\n";
  // One write per line so lines from the keeper and its child do not interleave; a log that
  // cannot be written is dropped rather than stopping the keeper.
  size_t off = 0;
  while (off < line.size()) {
    ssize_t n = write(STDERR_FILENO, line.data() + off, line.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    off += size_t(n);
  }
}

std::string Errno(const char* what) { return std::string(what) + ": " + strerror(errno); }

// ---------------------------------------------------------------------------------------------

struct Options {
  long long restart_delay_ms = 200;
  long long max_fds = 16384;
  std::string socket_dir = seccomp_agent::fd_store::kKeeperSocketDir;
  std::vector<std::string> command;
};

bool ParseCount(const std::string& flag, const std::string& text, long long min, long long max, long long* out) {
  if (!command_line::ParseDecimal(text.c_str(), min, max, out)) {
    fprintf(stderr, "seccomp-keeper: %s needs an integer from %lld to %lld, got \"%s\"\n", flag.c_str(), min, max,
            text.c_str());
    return false;
  }
  return true;
}

// Returns 0 to run, or the exit code (2 for bad usage, 0 after --help).
int ParseOptions(int argc, char** argv, Options* options) {
  command_line::Args args(argc, argv);
  while (args.Next()) {
    std::string arg = args.Arg();
    if (arg == "--") {
      for (char** command = args.Rest(); *command != nullptr; command++) options->command.push_back(*command);
      break;
    }
    if (arg == "-h" || arg == "--help") {
      fputs(kUsage, stdout);
      return -1;
    }
    std::string value;
    std::string flag = arg;
    size_t eq = arg.find('=');
    if (arg.rfind("--", 0) == 0 && eq != std::string::npos) {
      flag = arg.substr(0, eq);
      value = arg.substr(eq + 1);
    } else if (flag == "--restart-delay-ms" || flag == "--max-fds" || flag == "--socket-dir") {
      const char* next = args.Value();
      if (next == nullptr) {
        fprintf(stderr, "seccomp-keeper: %s needs a value\n%s", flag.c_str(), kUsage);
        return 2;
      }
      value = next;
    }
    if (flag == "--restart-delay-ms") {
      if (!ParseCount(flag, value, 0, 3'600'000, &options->restart_delay_ms)) return 2;
    } else if (flag == "--max-fds") {
      if (!ParseCount(flag, value, 1, 1'000'000, &options->max_fds)) return 2;
    } else if (flag == "--socket-dir") {
      if (value.size() < 2 || value[0] != '/' || value.size() > 60) {
        fprintf(stderr, "seccomp-keeper: --socket-dir needs an absolute path of at most 60 bytes, got \"%s\"\n", value.c_str());
        return 2;
      }
      while (value.size() > 1 && value.back() == '/') value.pop_back();
      options->socket_dir = value;
    } else {
      fprintf(stderr, "seccomp-keeper: unknown option \"%s\" (the command goes after --)\n%s", arg.c_str(), kUsage);
      return 2;
    }
  }
  if (options->command.empty()) {
    fprintf(stderr, "seccomp-keeper: no command given\n%s", kUsage);
    return 2;
  }
  return 0;
}

int ExitCodeOf(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

struct StoredFd {
  int fd;
  std::string name;
};

class Keeper {
 public:
  explicit Keeper(Options options) : options_(std::move(options)) {}

  ~Keeper() {
    CloseStore();
    if (socket_ >= 0) close(socket_);
    if (!address_.empty()) unlink(address_.c_str());
    if (signal_fd_ >= 0) close(signal_fd_);
  }

  int Run() {
    if (!SetUp()) return 1;
    StartChild();
    for (;;) {
      if (exit_code_ >= 0) return exit_code_;
      timespec timeout;
      timespec* wait = nullptr;
      // Wake up for the end of a refusal window too, so its summary is not held until the next event.
      long long wake_at = restart_at_ms_;
      if (refusal_window_ms_ >= 0 && (wake_at < 0 || refusal_window_ms_ + kRefusalWindowMs < wake_at)) {
        wake_at = refusal_window_ms_ + kRefusalWindowMs;
      }
      if (wake_at >= 0) {
        long long left = wake_at - MonotonicMs();
        if (left < 0) left = 0;
        timeout.tv_sec = left / 1000;
        timeout.tv_nsec = (left % 1000) * 1'000'000;
        wait = &timeout;
      }
      pollfd fds[2] = {{socket_, POLLIN, 0}, {signal_fd_, POLLIN, 0}};
      if (ppoll(fds, 2, wait, nullptr) < 0 && errno != EINTR) {
        Log(kError, Errno("ppoll failed; exiting"));
        return 1;
      }
      // Always before the signals: what a child sent just before dying is queued before its
      // SIGCHLD, and must be credited to it while its pid is still the current child's.
      DrainSocket();
      FlushRefusals(MonotonicMs());
      HandleSignals();
      if (restart_at_ms_ >= 0 && MonotonicMs() >= restart_at_ms_) {
        restart_at_ms_ = -1;
        StartChild();
      }
    }
  }

 private:
  bool SetUp() {
    // Variables meant for the keeper (were it run under systemd) must not reach the child.
    unsetenv("LISTEN_PID");
    unsetenv("LISTEN_FDS");
    unsetenv("LISTEN_FDNAMES");
    unsetenv("NOTIFY_SOCKET");
    unsetenv("SECCOMP_KEEPER_PID");

    // Outside a pod the keeper is not PID 1; become the reaper of the child's orphans anyway.
    if (getpid() != 1 && prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0) {
      Log(kWarn, Errno("prctl(PR_SET_CHILD_SUBREAPER) failed; orphans of the child are not reaped here"));
    }
    RaiseFdLimit();

    if (signal(SIGPIPE, SIG_IGN) == SIG_ERR) {
      Log(kError, Errno("signal(SIGPIPE) failed"));
      return false;
    }
    sigset_t set;
    sigemptyset(&set);
    for (int sig : {SIGCHLD, SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2}) sigaddset(&set, sig);
    if (sigprocmask(SIG_BLOCK, &set, nullptr) != 0) {
      Log(kError, Errno("sigprocmask failed"));
      return false;
    }
    signal_fd_ = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
    if (signal_fd_ < 0) {
      Log(kError, Errno("signalfd failed"));
      return false;
    }

    socket_ = socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (socket_ < 0) {
      Log(kError, Errno("socket(AF_UNIX, SOCK_DGRAM) failed"));
      return false;
    }
    int one = 1;
    if (setsockopt(socket_, SOL_SOCKET, SO_PASSCRED, &one, sizeof(one)) != 0) {
      Log(kError, Errno("setsockopt(SO_PASSCRED) failed"));
      return false;
    }
    // A path in a directory only root may enter: nobody else can bind the name, now or after this
    // keeper dies (an abstract name is anyone's the moment its owner is gone). The pid and a random
    // suffix keep two keepers apart (a rolling update, tests).
    std::string error;
    if (!seccomp_agent::fd_store::EnsurePrivateDirectory(options_.socket_dir, &error)) {
      Log(kError, error + "; exiting");
      return false;
    }
    RemoveStaleSockets();
    unsigned long long nonce = 0;
    if (getrandom(&nonce, sizeof(nonce), 0) != sizeof(nonce)) nonce = (unsigned long long)MonotonicMs();
    char name[64];
    snprintf(name, sizeof(name), "%s%d-%016llx.sock", seccomp_agent::fd_store::kKeeperSocketPrefix, int(getpid()), nonce);
    std::string address = options_.socket_dir + "/" + name;
    sockaddr_un addr;
    socklen_t length = 0;
    if (!seccomp_agent::fd_store::ParseUnixAddress(address, &addr, &length, &error)) {
      Log(kError, error);
      return false;
    }
    if (bind(socket_, reinterpret_cast<sockaddr*>(&addr), length) != 0) {
      Log(kError, Errno(("bind " + address + " failed").c_str()));
      return false;
    }
    address_ = address;
    Log(kInfo, "keeper started", {{"notifySocket", address_}, {"maxFds", options_.max_fds},
                                  {"restartDelayMs", options_.restart_delay_ms}});
    return true;
  }

  // Sockets of keepers that died without cleaning up (SIGKILL): their pid names no process now.
  void RemoveStaleSockets() {
    DIR* dir = opendir(options_.socket_dir.c_str());
    if (dir == nullptr) return;
    const std::string prefix = seccomp_agent::fd_store::kKeeperSocketPrefix;
    while (dirent* entry = readdir(dir)) {
      std::string name = entry->d_name;
      if (name.rfind(prefix, 0) != 0) continue;
      long long pid = atoll(name.c_str() + prefix.size());
      if (pid <= 0 || (kill(pid_t(pid), 0) != 0 && errno == ESRCH)) unlinkat(dirfd(dir), name.c_str(), 0);
    }
    closedir(dir);
  }

  // Every kept fd counts against the keeper's limit, and the child must be able to take them
  // all at 3.. too: use the hard limit (the child inherits it).
  void RaiseFdLimit() {
    rlimit limit;
    if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return;
    if (limit.rlim_cur < limit.rlim_max) {
      rlim_t soft = limit.rlim_cur;
      limit.rlim_cur = limit.rlim_max;
      if (setrlimit(RLIMIT_NOFILE, &limit) != 0) limit.rlim_cur = soft;
    }
    // The child needs room for the kept fds twice while it moves them into place.
    rlim_t needed = rlim_t(options_.max_fds) * 2 + 64;
    if (limit.rlim_cur < needed) {
      Log(kWarn, "the open file limit is below what --max-fds needs; the store fills up sooner",
          {{"limit", (long long)limit.rlim_cur}, {"needed", (long long)needed}});
    }
  }

  // --- the child ------------------------------------------------------------------------------

  void StartChild() {
    // Built before fork: the child only moves fds, sets variables and execs.
    std::string names;
    for (size_t i = 0; i < store_.size(); i++) names += (i ? ":" : "") + store_[i].name;
    std::vector<char*> argv;
    for (std::string& arg : options_.command) argv.push_back(&arg[0]);
    argv.push_back(nullptr);

    pid_t pid = fork();
    if (pid < 0) {
      Log(kError, Errno("fork failed; trying again"));
      ScheduleRestart(0);
      return;
    }
    if (pid == 0) ExecChild(names, argv.data());  // never returns
    child_pid_ = pid;
    child_started_ms_ = MonotonicMs();
    ready_ = false;
    stopping_ = false;
    Log(kInfo, "child started", {{"child", (long long)pid}, {"fds", (long long)store_.size()},
                                 {"command", options_.command[0]}});
  }

  // In the forked child (the keeper is single-threaded, so allocating here is safe).
  [[noreturn]] void ExecChild(const std::string& names, char** argv) {
    for (int sig = 1; sig < NSIG; sig++) signal(sig, SIG_DFL);  // KILL/STOP and RT gaps fail harmlessly
    sigset_t empty;
    sigemptyset(&empty);
    sigprocmask(SIG_SETMASK, &empty, nullptr);

    // Copy every kept fd above the target range first, then dup2 down in store order: a kept
    // fd may already sit on a number in 3..3+n-1 that another one must take.
    const int n = int(store_.size());
    std::vector<int> high(size_t(n), -1);
    for (int i = 0; i < n; i++) {
      high[size_t(i)] = fcntl(store_[size_t(i)].fd, F_DUPFD_CLOEXEC, kListenFdsStart + n);
      if (high[size_t(i)] < 0) {
        Log(kError, Errno("child: cannot copy a kept fd"), {{"name", store_[size_t(i)].name}});
        _exit(127);
      }
    }
    for (int i = 0; i < n; i++) {
      // dup2 leaves FD_CLOEXEC clear on the target: only these survive exec.
      if (dup2(high[size_t(i)], kListenFdsStart + i) < 0) {
        Log(kError, Errno("child: dup2 of a kept fd failed"), {{"name", store_[size_t(i)].name}});
        _exit(127);
      }
    }
    // SECCOMP_KEEPER_PID: the store is this keeper, our parent. The data plane watches it (a
    // pidfd) and, if it dies, starts a keeper again from its command line (docs/operators.md).
    if (setenv("NOTIFY_SOCKET", address_.c_str(), 1) != 0 ||
        setenv("SECCOMP_KEEPER_PID", std::to_string(getppid()).c_str(), 1) != 0) {
      _exit(127);
    }
    if (n > 0) {
      if (setenv("LISTEN_PID", std::to_string(getpid()).c_str(), 1) != 0 ||
          setenv("LISTEN_FDS", std::to_string(n).c_str(), 1) != 0 ||
          setenv("LISTEN_FDNAMES", names.c_str(), 1) != 0) {
        _exit(127);
      }
    }
    execvp(argv[0], argv);
    Log(kError, Errno(("child: cannot run " + std::string(argv[0])).c_str()));
    _exit(127);
  }

  void ScheduleRestart(long long uptime_ms) {
    if (uptime_ms < kQuickCrashMs) {
      quick_crashes_++;
    } else {
      quick_crashes_ = 1;
    }
    long long delay = options_.restart_delay_ms;
    long long cap = delay > kMaxRestartDelayMs ? delay : kMaxRestartDelayMs;
    for (int i = 1; i < quick_crashes_ && delay < cap; i++) delay *= 2;
    if (delay > cap) delay = cap;
    restart_at_ms_ = MonotonicMs() + delay;
    Log(kWarn, "restarting the child with the kept fds", {{"delayMs", delay}, {"fds", (long long)store_.size()}});
  }

  void OnChildExit(int status) {
    pid_t pid = child_pid_;
    child_pid_ = 0;
    long long uptime = MonotonicMs() - child_started_ms_;
    int code = ExitCodeOf(status);
    if (WIFSIGNALED(status)) {
      Log(terminating_ ? kInfo : kWarn, "child killed by a signal",
          {{"child", (long long)pid}, {"signal", (long long)WTERMSIG(status)}, {"uptimeMs", uptime},
           {"ready", ready_}, {"stopping", stopping_}, {"fds", (long long)store_.size()}});
    } else {
      Log(code == 0 || terminating_ ? kInfo : kWarn, "child exited",
          {{"child", (long long)pid}, {"code", (long long)code}, {"uptimeMs", uptime}, {"ready", ready_},
           {"stopping", stopping_}, {"fds", (long long)store_.size()}});
    }
    if (terminating_) {
      size_t closed = CloseStore();
      Log(kInfo, "keeper exiting with the child's status", {{"code", (long long)code}, {"closedFds", (long long)closed}});
      exit_code_ = code;
      return;
    }
    if (stopping_ && WIFEXITED(status) && code == 0) {
      // The child handed everything over to its successor (STOPPING=1, then a clean exit): a
      // restart would make a second owner of the same fds.
      size_t closed = CloseStore();
      idle_ = true;
      Log(kInfo, "child handed over; not restarting it, idle until SIGTERM", {{"closedFds", (long long)closed}});
      return;
    }
    ScheduleRestart(uptime);
  }

  // --- signals --------------------------------------------------------------------------------

  void HandleSignals() {
    for (;;) {
      signalfd_siginfo info;
      ssize_t n = read(signal_fd_, &info, sizeof(info));
      if (n < 0 && errno == EINTR) continue;
      if (n != sizeof(info)) return;  // EAGAIN: drained
      int sig = int(info.ssi_signo);
      if (sig == SIGCHLD) {
        Reap();
      } else if (sig == SIGTERM || sig == SIGINT) {
        Terminate(sig);
      } else if (child_pid_ > 0) {
        if (kill(child_pid_, sig) != 0) Log(kWarn, Errno("forwarding a signal to the child failed"));
      }
    }
  }

  void Reap() {
    for (;;) {
      int status = 0;
      pid_t pid = waitpid(-1, &status, WNOHANG);
      if (pid < 0 && errno == EINTR) continue;
      if (pid <= 0) return;  // none left (ECHILD) or none exited yet
      if (pid == child_pid_) OnChildExit(status);
      // Anything else is an orphan that ended up with us (PID 1 / subreaper): reaping is all it needs.
      if (exit_code_ >= 0) return;
    }
  }

  void Terminate(int sig) {
    terminating_ = true;
    if (child_pid_ > 0) {
      Log(kInfo, "forwarding the stop signal to the child", {{"signal", (long long)sig}, {"child", (long long)child_pid_}});
      if (kill(child_pid_, sig) != 0) Log(kWarn, Errno("kill of the child failed"));
      return;
    }
    // No child: idle after a handover, or between a crash and its restart.
    restart_at_ms_ = -1;
    size_t closed = CloseStore();
    Log(kInfo, "keeper exiting", {{"signal", (long long)sig}, {"afterHandover", idle_}, {"closedFds", (long long)closed}});
    exit_code_ = 0;
  }

  // --- the store ------------------------------------------------------------------------------

  size_t CloseStore() {
    size_t n = store_.size();
    for (const StoredFd& s : store_) close(s.fd);
    store_.clear();
    return n;
  }

  static void CloseAll(const std::vector<int>& fds) {
    for (int fd : fds) close(fd);
  }

  void DrainSocket() {
    for (;;) {
      char data[kMaxMessageBytes];
      alignas(cmsghdr) char control[CMSG_SPACE(sizeof(ucred)) + CMSG_SPACE(sizeof(int) * kMaxFdsPerMessage)];
      iovec iov = {data, sizeof(data)};
      msghdr msg;
      memset(&msg, 0, sizeof(msg));
      msg.msg_iov = &iov;
      msg.msg_iovlen = 1;
      msg.msg_control = control;
      msg.msg_controllen = sizeof(control);
      ssize_t n = recvmsg(socket_, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC | MSG_TRUNC);
      if (n < 0) {
        if (errno == EINTR) continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK) Log(kWarn, Errno("recvmsg on the notify socket failed"));
        return;
      }
      std::vector<int> fds;
      const ucred* cred = nullptr;
      for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
        if (c->cmsg_level != SOL_SOCKET) continue;
        if (c->cmsg_type == SCM_RIGHTS) {
          size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
          const unsigned char* p = CMSG_DATA(c);
          for (size_t i = 0; i < count; i++) {
            int fd;
            memcpy(&fd, p + i * sizeof(int), sizeof(int));
            fds.push_back(fd);
          }
        } else if (c->cmsg_type == SCM_CREDENTIALS && c->cmsg_len >= CMSG_LEN(sizeof(ucred))) {
          cred = reinterpret_cast<const ucred*>(CMSG_DATA(c));
        }
      }
      long long sender = cred != nullptr ? (long long)cred->pid : -1;
      if (msg.msg_flags & MSG_CTRUNC) {
        CloseAll(fds);
        LogRefusal("refused a notification whose fds did not fit (control data truncated); closed the fds received",
                   {{"sender", sender}, {"closedFds", (long long)fds.size()}}, fds.size());
        continue;
      }
      if (msg.msg_flags & MSG_TRUNC) {
        CloseAll(fds);
        LogRefusal("refused a notification longer than " + std::to_string(kMaxMessageBytes) + " bytes",
                   {{"sender", sender}, {"bytes", (long long)n}, {"closedFds", (long long)fds.size()}}, fds.size());
        continue;
      }
      if (cred == nullptr || child_pid_ <= 0 || cred->pid != child_pid_ || cred->uid != 0) {
        CloseAll(fds);
        LogRefusal("refused a notification from a process that is not the child",
                   {{"sender", sender}, {"child", (long long)child_pid_}, {"closedFds", (long long)fds.size()}}, fds.size());
        continue;
      }
      HandleMessage(std::string(data, size_t(n)), fds);
    }
  }

  // Applies one notification of the child; owns `fds` (keeps or closes each).
  void HandleMessage(const std::string& text, std::vector<int>& fds) {
    const long long child = child_pid_;
    if (text.find('\0') != std::string::npos) {
      CloseAll(fds);
      Log(kWarn, "refused a notification containing a NUL byte", {{"child", child}, {"closedFds", (long long)fds.size()}});
      return;
    }
    bool store = false, remove = false, has_name = false;
    std::string name, status;
    bool has_status = false, ready = false, stopping = false;
    size_t start = 0;
    while (start < text.size()) {
      size_t end = text.find('\n', start);
      if (end == std::string::npos) end = text.size();
      std::string line = text.substr(start, end - start);
      start = end + 1;
      // The first occurrence of a key wins; keys we do not know are ignored, as systemd does.
      if (line == "FDSTORE=1") store = true;
      else if (line == "FDSTOREREMOVE=1") remove = true;
      else if (line == "READY=1") ready = true;
      else if (line == "STOPPING=1") stopping = true;
      else if (line.rfind("FDNAME=", 0) == 0 && !has_name) has_name = true, name = line.substr(7);
      else if (line.rfind("STATUS=", 0) == 0 && !has_status) has_status = true, status = line.substr(7);
    }
    if (has_name && !IsValidName(name)) {
      CloseAll(fds);
      Log(kWarn, "refused a notification with an invalid FDNAME", {{"child", child}, {"fdname", name},
                                                                   {"closedFds", (long long)fds.size()}});
      return;
    }
    // Removal first, so "FDSTOREREMOVE=1\nFDSTORE=1" replaces a name's fds.
    if (remove) {
      if (!has_name) {
        Log(kWarn, "FDSTOREREMOVE=1 without FDNAME ignored", {{"child", child}});
      } else {
        size_t closed = 0;
        std::vector<StoredFd> kept;
        for (StoredFd& s : store_) {
          if (s.name == name) {
            close(s.fd);
            closed++;
          } else {
            kept.push_back(std::move(s));
          }
        }
        store_.swap(kept);
        Log(kInfo, "removed fds from the store", {{"child", child}, {"fdname", name}, {"closedFds", (long long)closed},
                                                 {"fds", (long long)store_.size()}});
      }
    }
    if (!fds.empty()) {
      if (!store) {
        CloseAll(fds);
        Log(kWarn, "closed fds sent without FDSTORE=1", {{"child", child}, {"closedFds", (long long)fds.size()}});
      } else {
        if (!has_name) name = "stored";  // systemd's name for an unnamed store
        if ((long long)(store_.size() + fds.size()) > options_.max_fds) {
          CloseAll(fds);
          Log(kWarn, "the store is full (--max-fds); closed the fds of this notification",
              {{"child", child}, {"fdname", name}, {"closedFds", (long long)fds.size()},
               {"fds", (long long)store_.size()}, {"maxFds", options_.max_fds}});
        } else {
          for (int fd : fds) store_.push_back(StoredFd{fd, name});
          Log(kInfo, "stored fds", {{"child", child}, {"fdname", name}, {"added", (long long)fds.size()},
                                   {"fds", (long long)store_.size()}});
        }
      }
    } else if (store) {
      Log(kWarn, "FDSTORE=1 without fds ignored", {{"child", child}, {"fdname", name}});
    }
    if (has_status) Log(kInfo, "child status", {{"child", child}, {"status", status}});
    if (ready && !ready_) {
      ready_ = true;
      Log(kInfo, "child is ready", {{"child", child}, {"fds", (long long)store_.size()}});
    }
    if (stopping && !stopping_) {
      stopping_ = true;
      Log(kInfo, "child is stopping (a clean exit now is a handover)", {{"child", child}, {"fds", (long long)store_.size()}});
    }
  }

  // Refusals are what anyone who may send to the socket can cause: at most kRefusalLines lines per
  // kRefusalWindowMs, then one summary line per window with how many were not logged.
  static constexpr int kRefusalLines = 10;
  static constexpr long long kRefusalWindowMs = 5'000;
  long long refusal_window_ms_ = -1;
  int refusal_lines_ = 0;
  long long refusals_suppressed_ = 0;
  long long suppressed_fds_ = 0;

  void FlushRefusals(long long now) {
    if (refusal_window_ms_ < 0 || now - refusal_window_ms_ < kRefusalWindowMs) return;
    if (refusals_suppressed_ > 0) {
      Log(kWarn, "refused " + std::to_string(refusals_suppressed_) + " more notification(s) in the last " +
                     std::to_string(kRefusalWindowMs / 1000) + " s without logging each (at most " +
                     std::to_string(kRefusalLines) + " lines per window); their fds were closed",
          {{"suppressed", refusals_suppressed_}, {"closedFds", suppressed_fds_}});
    }
    refusal_window_ms_ = -1;
    refusal_lines_ = 0;
    refusals_suppressed_ = 0;
    suppressed_fds_ = 0;
  }

  void LogRefusal(const std::string& msg, std::initializer_list<Field> fields, size_t closed_fds) {
    long long now = MonotonicMs();
    FlushRefusals(now);
    if (refusal_window_ms_ < 0) refusal_window_ms_ = now;
    if (refusal_lines_ < kRefusalLines) {
      refusal_lines_++;
      Log(kWarn, msg, fields);
      return;
    }
    refusals_suppressed_++;
    suppressed_fds_ += (long long)closed_fds;
  }

  Options options_;
  std::string address_;
  int socket_ = -1;
  int signal_fd_ = -1;
  std::vector<StoredFd> store_;
  pid_t child_pid_ = 0;
  long long child_started_ms_ = 0;
  bool ready_ = false;
  bool stopping_ = false;
  bool terminating_ = false;
  bool idle_ = false;
  int quick_crashes_ = 0;
  long long restart_at_ms_ = -1;
  int exit_code_ = -1;
};

}  // namespace

int main(int argc, char** argv) {
  Options options;
  int parsed = ParseOptions(argc, argv, &options);
  if (parsed < 0) return 0;
  if (parsed > 0) return parsed;
  Keeper keeper(std::move(options));
  return keeper.Run();
}
