// seccomp-soak-workload: the load of the zero-disruption proof (issue 4). It installs no filter:
// it runs under `seccomp-run --syscalls getppid`, so every call is one notification the agent
// must answer while the test restarts and hands over the agent processes around it.
//
//   seccomp-soak-workload [--threads N] [--interval-ms M] [--join-timeout-ms J]
//                         [--stop-on-stdin-eof]
//                         [--mkdir DIR [--expect-suffix S | --expect-errno E] [--pause-us P]]
//
// With --mkdir each call is mkdir(DIR/tT-n) instead of getppid (run it under seccomp-run
// --syscalls mkdir,mkdirat), checked against the answer the policy gives: --expect-suffix S, the
// directory made is DIR/tT-nS and DIR/tT-n does not exist (MKDIR_TMPL); --expect-errno E, mkdir
// fails with E and makes nothing (a rule's errno, counted as correct, not as an error); neither,
// DIR/tT-n is made. Anything else is "wrong" (a default continue makes the unsuffixed directory).
// What is made is removed again (rmdir is not notified). P: microseconds between two calls.
//
// Every M ms one JSON line (this window only):
//   {"t":unixMs,"mono":monotonicMs,"calls":n,"maxUs":x,"oldestInFlightUs":x,"errors":{"38":n},"wrong":n}
// and on SIGTERM/SIGINT (or stdin EOF) the last window, then the totals:
//   {"final":true,"calls":n,"errors":{...},"wrong":n,"maxUs":x,"stuckThreads":n}
// Exit 0, or 3 when a thread is still blocked in its syscall after J ms.
//
// Nothing is sampled: each thread counts every call, so a failure or a pause cannot fall between
// two samples. A call that never returns is not a completed call and so never reaches maxUs:
// each thread publishes the start of its current call, and oldestInFlightUs shows the hang while
// it lasts. Times come from CLOCK_MONOTONIC (vDSO, never intercepted).
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <limits.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <new>

#include "command_line.h"
#include "monotonic_clock.h"

namespace {

constexpr int kMaxErrno = 4095;  // the kernel's error range: -4095..-1

// One worker's counters. The worker adds; the main thread takes a window's worth with exchange,
// so no call is counted twice or lost between windows. Aligned so workers never share a line.
struct alignas(64) ThreadState {
  pthread_t thread;
  std::atomic<uint64_t> call_start_ns{0};  // start of the call in progress, 0 between calls
  std::atomic<uint64_t> calls{0};
  std::atomic<uint64_t> max_ns{0};
  std::atomic<uint64_t> wrong{0};
  std::atomic<uint64_t> errors[kMaxErrno + 1] = {};  // by errno; [0] for an errno out of range
};

ThreadState* g_states = nullptr;  // the workers, so each knows its index

struct Config {
  int threads = 4;
  long interval_ms = 100;
  long join_timeout_ms = 5000;
  bool stop_on_stdin_eof = false;
  const char* mkdir_dir = nullptr;
  const char* expect_suffix = nullptr;
  long expect_errno = 0;
  long pause_us = 0;
};

// Running sums over the windows already printed.
struct Totals {
  uint64_t calls = 0;
  uint64_t max_ns = 0;
  uint64_t wrong = 0;
  uint64_t errors[kMaxErrno + 1] = {};
};

std::atomic<bool> g_stop{false};
std::atomic<long> g_expected_ppid{0};
Config g_config;  // set once in main, before the threads start

// The real parent, from /proc/self/stat field 4: getppid itself is the intercepted call.
// No allocation: it also runs inside the loop when an answer looks wrong.
long ReadPpid() {
  const int fd = open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  char buf[1024];
  ssize_t len;
  do {
    len = read(fd, buf, sizeof buf - 1);
  } while (len < 0 && errno == EINTR);
  close(fd);
  if (len <= 0) return -1;
  buf[len] = '\0';
  // comm (field 2) may hold spaces and parentheses: fields 3.. start after the last ')'.
  const char* close_paren = strrchr(buf, ')');
  if (close_paren == nullptr) return -1;
  char state;
  long ppid;
  if (sscanf(close_paren + 1, " %c %ld", &state, &ppid) != 2) return -1;
  return ppid;
}

bool IsDir(const char* path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

// After mkdir(path) returned rc/err: true when that is the answer the policy gives (see the top).
// Removes whatever the call made. Sets *failed when the call failed with an errno not expected.
bool MkdirAnswerRight(const char* path, long rc, int err, bool* failed) {
  const Config& c = g_config;
  *failed = false;
  if (c.expect_errno != 0) {
    if (rc == -1 && err == c.expect_errno && !IsDir(path)) return true;
    if (rc == 0) rmdir(path);
    *failed = rc == -1 && err != c.expect_errno;
    return *failed;  // a failure counts as an error, not as wrong too
  }
  if (rc == -1) {
    *failed = true;
    return true;
  }
  if (c.expect_suffix == nullptr) {
    const bool made = IsDir(path);
    rmdir(path);
    return made;
  }
  char suffixed[PATH_MAX];
  snprintf(suffixed, sizeof suffixed, "%s%s", path, c.expect_suffix);
  const bool plain = IsDir(path);
  const bool right = IsDir(suffixed) && !plain;
  rmdir(suffixed);
  if (plain) rmdir(path);
  return right;
}

void* RunThread(void* arg) {
  ThreadState* s = static_cast<ThreadState*>(arg);
  const bool mkdir_mode = g_config.mkdir_dir != nullptr;
  char path[PATH_MAX] = "";
  uint64_t n = 0;
  const long index = s - g_states;
  while (!g_stop.load(std::memory_order_relaxed)) {
    if (mkdir_mode) snprintf(path, sizeof path, "%s/t%ld-%llu", g_config.mkdir_dir, index, static_cast<unsigned long long>(n++));
    const uint64_t start = MonotonicNs();
    s->call_start_ns.store(start, std::memory_order_release);
    // The raw syscall: libc may not cache or skip it.
    const long rc = mkdir_mode ? syscall(SYS_mkdir, path, 0755) : syscall(SYS_getppid);
    const int err = errno;
    const uint64_t elapsed = MonotonicNs() - start;
    s->call_start_ns.store(0, std::memory_order_release);

    if (mkdir_mode) {
      bool failed = false;
      if (!MkdirAnswerRight(path, rc, err, &failed)) s->wrong.fetch_add(1, std::memory_order_relaxed);
      if (failed) {
        const int idx = err >= 1 && err <= kMaxErrno ? err : 0;
        s->errors[idx].fetch_add(1, std::memory_order_relaxed);
      }
    } else if (rc == -1) {
      const int index = err >= 1 && err <= kMaxErrno ? err : 0;
      s->errors[index].fetch_add(1, std::memory_order_relaxed);
    } else if (rc != g_expected_ppid.load(std::memory_order_relaxed)) {
      // Reparented (the parent died) is not a wrong answer: only a value the kernel would not give.
      const long ppid = ReadPpid();
      if (ppid == rc) {
        g_expected_ppid.store(ppid, std::memory_order_relaxed);
      } else {
        s->wrong.fetch_add(1, std::memory_order_relaxed);
      }
    }
    // A CAS, not load-then-store: the main thread may zero max_ns between the two.
    uint64_t seen = s->max_ns.load(std::memory_order_relaxed);
    while (elapsed > seen &&
           !s->max_ns.compare_exchange_weak(seen, elapsed, std::memory_order_relaxed)) {
    }
    s->calls.fetch_add(1, std::memory_order_relaxed);
    if (g_config.pause_us > 0) usleep(static_cast<useconds_t>(g_config.pause_us));
  }
  return nullptr;
}

// Appends to line[*len]; the caller's buffer is sized for the worst case.
void Append(char* line, size_t size, size_t* len, const char* format, ...)
    __attribute__((format(printf, 4, 5)));
void Append(char* line, size_t size, size_t* len, const char* format, ...) {
  if (*len >= size) return;
  va_list args;
  va_start(args, format);
  const int n = vsnprintf(line + *len, size - *len, format, args);
  va_end(args);
  if (n > 0) *len += static_cast<size_t>(n);
  if (*len >= size) *len = size - 1;  // truncated: keep the terminating NUL out of the line
}

void AppendErrors(char* line, size_t size, size_t* len, const uint64_t* errors) {
  Append(line, size, len, "{");
  bool first = true;
  for (int e = 0; e <= kMaxErrno; e++) {
    if (errors[e] == 0) continue;
    Append(line, size, len, "%s\"%d\":%llu", first ? "" : ",", e,
           static_cast<unsigned long long>(errors[e]));
    first = false;
  }
  Append(line, size, len, "}");
}

void WriteLine(const char* line, size_t len) {
  fwrite(line, 1, len, stdout);
  fputc('\n', stdout);
  fflush(stdout);
}

// Every errno may appear, with 20 digits each: the worst case fits.
char g_line[64 + (kMaxErrno + 1) * 28];
uint64_t g_window_errors[kMaxErrno + 1];

// Takes the window since the last call from every thread, prints it, adds it to the totals.
void PrintWindow(ThreadState* states, int n, Totals* totals) {
  uint64_t calls = 0, max_ns = 0, wrong = 0, oldest_start = 0;
  memset(g_window_errors, 0, sizeof g_window_errors);
  for (int i = 0; i < n; i++) {
    ThreadState& s = states[i];
    calls += s.calls.exchange(0, std::memory_order_relaxed);
    wrong += s.wrong.exchange(0, std::memory_order_relaxed);
    const uint64_t m = s.max_ns.exchange(0, std::memory_order_relaxed);
    if (m > max_ns) max_ns = m;
    for (int e = 0; e <= kMaxErrno; e++) {
      // Load first: a locked exchange on 4096 idle counters per window would be wasted work.
      if (s.errors[e].load(std::memory_order_relaxed) == 0) continue;
      g_window_errors[e] += s.errors[e].exchange(0, std::memory_order_relaxed);
    }
    const uint64_t start = s.call_start_ns.load(std::memory_order_acquire);
    if (start != 0 && (oldest_start == 0 || start < oldest_start)) oldest_start = start;
  }
  // Read the clock after the starts, so an age is never negative.
  const uint64_t mono = MonotonicNs();
  const uint64_t real = ClockNs(CLOCK_REALTIME);
  const uint64_t oldest_ns = oldest_start != 0 && mono > oldest_start ? mono - oldest_start : 0;

  totals->calls += calls;
  totals->wrong += wrong;
  if (max_ns > totals->max_ns) totals->max_ns = max_ns;
  for (int e = 0; e <= kMaxErrno; e++) totals->errors[e] += g_window_errors[e];

  size_t len = 0;
  Append(g_line, sizeof g_line, &len,
         "{\"t\":%llu,\"mono\":%llu,\"calls\":%llu,\"maxUs\":%.3f,\"oldestInFlightUs\":%.3f,\"errors\":",
         static_cast<unsigned long long>(real / 1000000ULL),
         static_cast<unsigned long long>(mono / 1000000ULL), static_cast<unsigned long long>(calls),
         static_cast<double>(max_ns) / 1000.0, static_cast<double>(oldest_ns) / 1000.0);
  AppendErrors(g_line, sizeof g_line, &len, g_window_errors);
  Append(g_line, sizeof g_line, &len, ",\"wrong\":%llu}", static_cast<unsigned long long>(wrong));
  WriteLine(g_line, len);
}

void PrintFinal(const Totals& totals, int stuck) {
  size_t len = 0;
  Append(g_line, sizeof g_line, &len, "{\"final\":true,\"calls\":%llu,\"errors\":",
         static_cast<unsigned long long>(totals.calls));
  AppendErrors(g_line, sizeof g_line, &len, totals.errors);
  Append(g_line, sizeof g_line, &len, ",\"wrong\":%llu,\"maxUs\":%.3f,\"stuckThreads\":%d}",
         static_cast<unsigned long long>(totals.wrong), static_cast<double>(totals.max_ns) / 1000.0,
         stuck);
  WriteLine(g_line, len);
}

const char kUsage[] =
    "usage: seccomp-soak-workload [--threads N] [--interval-ms M] [--join-timeout-ms J]\n"
    "                             [--stop-on-stdin-eof]\n"
    "                             [--mkdir DIR [--expect-suffix S | --expect-errno E] [--pause-us P]]\n"
    "\n"
    "N threads (default 4) call getppid without pause; run it under seccomp-run --syscalls getppid.\n"
    "Every M ms (default 100) prints one JSON line for that window:\n"
    "  {\"t\":unixMs,\"mono\":monotonicMs,\"calls\":n,\"maxUs\":x,\"oldestInFlightUs\":x,\n"
    "   \"errors\":{\"errno\":n,...},\"wrong\":n}\n"
    "On SIGTERM, SIGINT or (with --stop-on-stdin-eof) stdin EOF: stops, waits J ms (default 5000)\n"
    "for the threads, prints the last window and\n"
    "  {\"final\":true,\"calls\":n,\"errors\":{...},\"wrong\":n,\"maxUs\":x,\"stuckThreads\":n}\n"
    "With --mkdir DIR each call is mkdir(DIR/tT-n), checked: --expect-suffix S, DIR/tT-nS is made\n"
    "and DIR/tT-n is not; --expect-errno E, mkdir fails with E (not counted as an error); neither:\n"
    "DIR/tT-n is made. Anything else counts as wrong. P: microseconds between two calls.\n"
    "Exits 0, or 3 when a thread is still blocked in its syscall; 2 on a bad flag.\n";

long ParseLong(const char* flag, const char* value, long min, long max) {
  long long v = 0;
  if (!command_line::ParseDecimal(value, min, max, &v)) {
    fprintf(stderr, "seccomp-soak-workload: %s must be an integer from %ld to %ld, got '%s'\n%s",
            flag, min, max, value, kUsage);
    exit(2);
  }
  return static_cast<long>(v);
}

void ParseArgs(int argc, char** argv, Config* config) {
  command_line::Args args(argc, argv);
  while (args.Next()) {
    const char* arg = args.Arg();
    if (args.Is("--help") || args.Is("-h")) {
      fputs(kUsage, stdout);
      exit(0);
    }
    if (args.Is("--stop-on-stdin-eof")) {
      config->stop_on_stdin_eof = true;
      continue;
    }
    const bool known = args.Is("--threads") || args.Is("--interval-ms") || args.Is("--join-timeout-ms") ||
                       args.Is("--mkdir") || args.Is("--expect-suffix") || args.Is("--expect-errno") ||
                       args.Is("--pause-us");
    if (!known) {
      fprintf(stderr, "seccomp-soak-workload: unknown flag '%s'\n%s", arg, kUsage);
      exit(2);
    }
    const char* value = args.Value();
    if (value == nullptr) {
      fprintf(stderr, "seccomp-soak-workload: %s needs a value\n%s", arg, kUsage);
      exit(2);
    }
    if (args.Is("--threads")) {
      config->threads = static_cast<int>(ParseLong(arg, value, 1, 1024));
    } else if (args.Is("--mkdir")) {
      config->mkdir_dir = value;
    } else if (args.Is("--expect-suffix")) {
      config->expect_suffix = value;
    } else if (args.Is("--expect-errno")) {
      config->expect_errno = ParseLong(arg, value, 1, kMaxErrno);
    } else if (args.Is("--pause-us")) {
      config->pause_us = ParseLong(arg, value, 0, 1000000);
    } else if (args.Is("--interval-ms")) {
      config->interval_ms = ParseLong(arg, value, 1, 3600000);
    } else {
      config->join_timeout_ms = ParseLong(arg, value, 0, 3600000);
    }
  }
}

// Serves the interval timer, the stop signals and stdin until it is time to stop.
// Returns 0, or 1 when the wait itself failed (then the caller stops too).
int WaitForStop(const Config& config, int signal_fd, ThreadState* states, Totals* totals) {
  struct pollfd fds[2];
  fds[0] = {signal_fd, POLLIN, 0};
  fds[1] = {STDIN_FILENO, POLLIN, 0};
  const nfds_t nfds = config.stop_on_stdin_eof ? 2 : 1;
  const uint64_t interval_ns = static_cast<uint64_t>(config.interval_ms) * 1000000ULL;
  uint64_t next_tick = MonotonicNs() + interval_ns;
  for (;;) {
    uint64_t now = MonotonicNs();
    if (now >= next_tick) {
      PrintWindow(states, config.threads, totals);
      // Late (a stopped process, a slow pipe): skip the missed ticks rather than print a burst.
      while (next_tick <= now) next_tick += interval_ns;
      continue;
    }
    const uint64_t wait_ns = next_tick - now;
    struct timespec timeout;
    timeout.tv_sec = static_cast<time_t>(wait_ns / 1000000000ULL);
    timeout.tv_nsec = static_cast<long>(wait_ns % 1000000000ULL);
    const int ready = ppoll(fds, nfds, &timeout, nullptr);
    if (ready < 0) {
      if (errno == EINTR) continue;
      fprintf(stderr, "seccomp-soak-workload: ppoll: %s; stopping\n", strerror(errno));
      return 1;
    }
    if (fds[0].revents != 0) {
      struct signalfd_siginfo info;
      const ssize_t got = read(signal_fd, &info, sizeof info);
      if (got == static_cast<ssize_t>(sizeof info)) return 0;
      if (got < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      fprintf(stderr, "seccomp-soak-workload: read signalfd: %s; stopping\n",
              got < 0 ? strerror(errno) : "short read");
      return 1;
    }
    if (nfds == 2 && fds[1].revents != 0) {
      char buf[4096];
      const ssize_t got = read(STDIN_FILENO, buf, sizeof buf);
      if (got == 0) return 0;
      if (got < 0 && errno != EINTR && errno != EAGAIN) {
        fprintf(stderr, "seccomp-soak-workload: read stdin: %s; stopping\n", strerror(errno));
        return 0;
      }
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  Config& config = g_config;
  ParseArgs(argc, argv, &config);
  if ((config.expect_suffix != nullptr || config.expect_errno != 0) && config.mkdir_dir == nullptr) {
    fprintf(stderr, "seccomp-soak-workload: --expect-suffix and --expect-errno need --mkdir\n%s", kUsage);
    return 2;
  }
  if (config.expect_suffix != nullptr && config.expect_errno != 0) {
    fprintf(stderr, "seccomp-soak-workload: --expect-suffix and --expect-errno exclude each other\n%s", kUsage);
    return 2;
  }

  // A closed stdin is at its end; and fd 0 must not be reused by the signalfd below.
  if (fcntl(STDIN_FILENO, F_GETFD) < 0 && errno == EBADF &&
      open("/dev/null", O_RDONLY) != STDIN_FILENO) {
    fprintf(stderr, "seccomp-soak-workload: cannot open /dev/null as the missing stdin\n");
    return 1;
  }

  const long ppid = ReadPpid();
  if (ppid < 0) {
    fprintf(stderr, "seccomp-soak-workload: cannot read the parent pid from /proc/self/stat\n");
    return 1;
  }
  g_expected_ppid.store(ppid);

  // Blocked before the threads exist, so they inherit the mask and only signalfd sees the signals.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  if (sigprocmask(SIG_BLOCK, &stop_signals, nullptr) != 0) {
    fprintf(stderr, "seccomp-soak-workload: sigprocmask: %s\n", strerror(errno));
    return 1;
  }
  const int signal_fd = signalfd(-1, &stop_signals, SFD_CLOEXEC);
  if (signal_fd < 0) {
    fprintf(stderr, "seccomp-soak-workload: signalfd: %s\n", strerror(errno));
    return 1;
  }

  const int n = config.threads;
  ThreadState* states = new (std::nothrow) ThreadState[n];
  g_states = states;
  static Totals totals;
  if (states == nullptr) {
    fprintf(stderr, "seccomp-soak-workload: out of memory for %d threads\n", n);
    return 1;
  }
  for (int i = 0; i < n; i++) {
    const int rc = pthread_create(&states[i].thread, nullptr, RunThread, &states[i]);
    if (rc != 0) {
      fprintf(stderr, "seccomp-soak-workload: pthread_create: %s\n", strerror(rc));
      _exit(1);
    }
  }

  WaitForStop(config, signal_fd, states, &totals);
  g_stop.store(true, std::memory_order_relaxed);

  // One deadline for all: a thread blocked in a call nobody answers must not hold us forever.
  const struct timespec deadline = RealtimeDeadline(config.join_timeout_ms);
  int stuck = 0;
  for (int i = 0; i < n; i++) {
    int rc;
    do {
      rc = pthread_timedjoin_np(states[i].thread, nullptr, &deadline);
    } while (rc == EINTR);
    if (rc != 0) stuck++;
  }

  // The calls since the last tick, so the windows add up to the totals.
  PrintWindow(states, n, &totals);
  PrintFinal(totals, stuck);
  // Stuck threads cannot be joined, and states must outlive them: leave without cleanup.
  _exit(stuck == 0 ? 0 : 3);
}
