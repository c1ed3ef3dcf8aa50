// seccomp-bench-workload: the load side of `npm run bench`. It installs no filter: it runs under
// seccomp-run, so each call of the chosen syscall makes one notification round trip through
// whichever agent holds the notify fd (the bare C responder or the data plane).
//
//   seccomp-bench-workload --threads N --seconds S [--warmup-ms W] [--syscall getppid|mkdir]
//                          [--path-prefix P] [--linger-ms L]
//   seccomp-bench-workload --idle      (a live container that never calls: waits for SIGTERM)
//
// SIGTERM (or SIGINT) during the measured seconds ends them early, and the line is printed as
// usual for the time measured: a noisy neighbour floods until the measured container is done.
// --linger-ms keeps the process (the container) alive up to L ms after its line, making no more
// calls, until SIGTERM: the bench reads the agent's record of it then, not while it measures.
//
// Prints one JSON line: {syscall, threads, calls, seconds, callsPerSec, p50Us, p90Us, p99Us,
// maxUs, errors}. Latency per call is taken with CLOCK_MONOTONIC (vDSO, never intercepted) and
// recorded into a per-thread log-linear histogram: the loop never allocates or locks.
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>

#include "command_line.h"
#include "monotonic_clock.h"

namespace {

// Log-linear buckets: exact below 128 ns, then 64 sub-buckets per power of two (error < 0.8%).
constexpr int kSubBits = 6;
constexpr int kLinear = 1 << (kSubBits + 1);
constexpr int kBuckets = kLinear + (64 - (kSubBits + 1)) * (1 << kSubBits);

int BucketOf(uint64_t ns) {
  if (ns < static_cast<uint64_t>(kLinear)) return static_cast<int>(ns);
  const int exponent = 63 - __builtin_clzll(ns);
  const int shift = exponent - kSubBits;
  const int top = static_cast<int>(ns >> shift);  // in [64, 127]
  return kLinear + (exponent - (kSubBits + 1)) * (1 << kSubBits) + (top - (1 << kSubBits));
}

// Midpoint of a bucket, in ns: the value a percentile falling into it is reported as.
double BucketValue(int index) {
  if (index < kLinear) return index;
  const int rel = index - kLinear;
  const int exponent = rel / (1 << kSubBits) + kSubBits + 1;
  const int top = rel % (1 << kSubBits) + (1 << kSubBits);
  const int shift = exponent - kSubBits;
  const double lower = static_cast<double>(static_cast<uint64_t>(top) << shift);
  return lower + static_cast<double>(1ULL << shift) / 2.0;
}

struct alignas(64) ThreadState {
  pthread_t thread;
  int index;
  uint64_t calls;
  uint64_t errors;
  int first_errno;
  uint64_t max_ns;
  uint64_t buckets[kBuckets];
};

enum Phase { kWarmup = 0, kMeasure = 1, kStop = 2 };

struct Config {
  int threads = 1;
  double seconds = 1.0;
  long warmup_ms = 200;
  bool mkdir = false;
  bool idle = false;
  long linger_ms = 0;
  const char* path_prefix = nullptr;
};

std::atomic<int> g_phase{kWarmup};
Config g_config;
char g_prefix[PATH_MAX - 32];

void* RunThread(void* arg) {
  ThreadState* state = static_cast<ThreadState*>(arg);
  char path[PATH_MAX];
  snprintf(path, sizeof path, "%s-%d", g_prefix, state->index);
  const bool use_mkdir = g_config.mkdir;
  for (;;) {
    const int phase = g_phase.load(std::memory_order_relaxed);
    if (phase == kStop) break;
    const uint64_t start = MonotonicNs();
    // Raw syscalls: no libc wrapper may cache or skip them.
    const long rc = use_mkdir ? syscall(SYS_mkdir, path, 0755) : syscall(SYS_getppid);
    const uint64_t elapsed = MonotonicNs() - start;
    // getppid never fails; mkdir of the thread's own directory gives 0 once, then EEXIST.
    if (rc < 0 && !(use_mkdir && errno == EEXIST)) {
      if (state->errors++ == 0) state->first_errno = errno;
    }
    if (phase == kMeasure) {
      state->calls++;
      state->buckets[BucketOf(elapsed)]++;
      if (elapsed > state->max_ns) state->max_ns = elapsed;
    }
  }
  if (use_mkdir) rmdir(path);
  return nullptr;
}

void SleepNs(uint64_t ns) {
  struct timespec ts;
  ts.tv_sec = static_cast<time_t>(ns / 1000000000ULL);
  ts.tv_nsec = static_cast<long>(ns % 1000000000ULL);
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

// The main thread: waits `ns` or until SIGTERM/SIGINT (blocked in every thread, see main), whichever
// comes first. True when a signal ended the wait.
bool WaitNsOrSignal(uint64_t ns, const sigset_t* stop_signals) {
  const uint64_t until = MonotonicNs() + ns;
  for (;;) {
    const uint64_t now = MonotonicNs();
    if (now >= until) return false;
    struct timespec left;
    left.tv_sec = static_cast<time_t>((until - now) / 1000000000ULL);
    left.tv_nsec = static_cast<long>((until - now) % 1000000000ULL);
    if (sigtimedwait(stop_signals, nullptr, &left) > 0) return true;
    // EAGAIN: the time is up (checked above); EINTR: another signal; wait for the rest.
  }
}

[[noreturn]] void Usage(const char* why) {
  fprintf(stderr,
          "seccomp-bench-workload: %s\n"
          "usage: seccomp-bench-workload --threads N --seconds S [--warmup-ms W] "
          "[--syscall getppid|mkdir] [--path-prefix P] [--linger-ms L]\n"
          "       seccomp-bench-workload --idle\n",
          why);
  exit(2);
}

bool ParseArgs(int argc, char** argv, Config* config) {
  command_line::Args args(argc, argv);
  while (args.Next()) {
    if (args.Is("--idle")) {
      config->idle = true;
      continue;
    }
    const char* value = args.Value();
    if (value == nullptr) Usage("missing value or unknown flag");
    char* end = nullptr;
    long long number = 0;
    if (args.Is("--threads")) {
      if (!command_line::ParseDecimal(value, 1, 1024, &number)) Usage("--threads must be 1 to 1024");
      config->threads = static_cast<int>(number);
    } else if (args.Is("--seconds")) {
      config->seconds = strtod(value, &end);
      if (*end != '\0' || !(config->seconds > 0) || config->seconds > 3600) Usage("--seconds must be > 0");
    } else if (args.Is("--warmup-ms")) {
      if (!command_line::ParseDecimal(value, 0, LONG_MAX, &number)) Usage("--warmup-ms must be >= 0");
      config->warmup_ms = static_cast<long>(number);
    } else if (args.Is("--linger-ms")) {
      if (!command_line::ParseDecimal(value, 0, 3600000, &number)) Usage("--linger-ms must be 0 to 3600000");
      config->linger_ms = static_cast<long>(number);
    } else if (args.Is("--syscall")) {
      if (strcmp(value, "mkdir") == 0) config->mkdir = true;
      else if (strcmp(value, "getppid") != 0) Usage("--syscall must be getppid or mkdir");
    } else if (args.Is("--path-prefix")) {
      config->path_prefix = value;
    } else {
      Usage("unknown flag");
    }
  }
  return true;
}

// A live container that never makes an intercepted call: holds its filter until SIGTERM.
int RunIdle() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  if (sigprocmask(SIG_BLOCK, &set, nullptr) != 0) {
    perror("seccomp-bench-workload: sigprocmask");
    return 1;
  }
  int sig = 0;
  while (sigwait(&set, &sig) != 0) {
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  ParseArgs(argc, argv, &g_config);
  if (g_config.idle) return RunIdle();

  if (g_config.path_prefix != nullptr) {
    if (strlen(g_config.path_prefix) >= sizeof g_prefix) Usage("--path-prefix too long");
    snprintf(g_prefix, sizeof g_prefix, "%s", g_config.path_prefix);
  } else {
    snprintf(g_prefix, sizeof g_prefix, "/tmp/seccomp-bench-mkdir-%d", static_cast<int>(getpid()));
  }

  const int n = g_config.threads;
  ThreadState* states = static_cast<ThreadState*>(aligned_alloc(64, sizeof(ThreadState) * n));
  if (states == nullptr) {
    fprintf(stderr, "seccomp-bench-workload: out of memory for %d histograms\n", n);
    return 1;
  }
  memset(states, 0, sizeof(ThreadState) * n);

  // SIGTERM and SIGINT are taken by the main thread alone (sigtimedwait); the threads inherit the mask.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  if (sigprocmask(SIG_BLOCK, &stop_signals, nullptr) != 0) {
    perror("seccomp-bench-workload: sigprocmask");
    return 1;
  }

  g_phase.store(g_config.warmup_ms > 0 ? kWarmup : kMeasure);
  uint64_t measure_start = MonotonicNs();
  for (int i = 0; i < n; i++) {
    states[i].index = i;
    const int rc = pthread_create(&states[i].thread, nullptr, RunThread, &states[i]);
    if (rc != 0) {
      fprintf(stderr, "seccomp-bench-workload: pthread_create: %s\n", strerror(rc));
      _exit(1);
    }
  }
  if (g_config.warmup_ms > 0) {
    SleepNs(static_cast<uint64_t>(g_config.warmup_ms) * 1000000ULL);
    measure_start = MonotonicNs();
    g_phase.store(kMeasure);
  }
  WaitNsOrSignal(static_cast<uint64_t>(g_config.seconds * 1e9), &stop_signals);
  g_phase.store(kStop);
  const uint64_t measure_end = MonotonicNs();

  // A thread stuck in a notification nobody answers would hang us forever: give up loudly.
  const struct timespec deadline = RealtimeDeadline(10000);
  for (int i = 0; i < n; i++) {
    const int rc = pthread_timedjoin_np(states[i].thread, nullptr, &deadline);
    if (rc != 0) {
      fprintf(stderr, "seccomp-bench-workload: thread %d still blocked in its syscall 10 s after the end (%s): is the agent answering?\n",
              i, strerror(rc));
      _exit(1);
    }
  }

  uint64_t calls = 0, errors = 0, max_ns = 0;
  int first_errno = 0;
  static uint64_t total[kBuckets];
  for (int i = 0; i < n; i++) {
    calls += states[i].calls;
    errors += states[i].errors;
    if (first_errno == 0) first_errno = states[i].first_errno;
    if (states[i].max_ns > max_ns) max_ns = states[i].max_ns;
    for (int b = 0; b < kBuckets; b++) total[b] += states[i].buckets[b];
  }
  double pct[3] = {0, 0, 0};
  const double wanted[3] = {0.50, 0.90, 0.99};
  for (int p = 0; p < 3 && calls > 0; p++) {
    uint64_t rank = static_cast<uint64_t>(wanted[p] * static_cast<double>(calls));
    if (rank == 0) rank = 1;
    uint64_t seen = 0;
    for (int b = 0; b < kBuckets; b++) {
      seen += total[b];
      if (seen >= rank) {
        pct[p] = BucketValue(b);
        break;
      }
    }
  }
  const double seconds = static_cast<double>(measure_end - measure_start) / 1e9;
  printf("{\"syscall\":\"%s\",\"threads\":%d,\"calls\":%llu,\"seconds\":%.3f,\"callsPerSec\":%.0f,"
         "\"p50Us\":%.2f,\"p90Us\":%.2f,\"p99Us\":%.2f,\"maxUs\":%.2f,\"errors\":%llu,\"firstErrno\":%d}\n",
         g_config.mkdir ? "mkdir" : "getppid", n, static_cast<unsigned long long>(calls), seconds,
         seconds > 0 ? static_cast<double>(calls) / seconds : 0.0, pct[0] / 1000.0, pct[1] / 1000.0,
         pct[2] / 1000.0, static_cast<double>(max_ns) / 1000.0, static_cast<unsigned long long>(errors),
         first_errno);
  fflush(stdout);
  free(states);
  if (g_config.linger_ms > 0) WaitNsOrSignal(static_cast<uint64_t>(g_config.linger_ms) * 1000000ULL, &stop_signals);
  return errors > 0 ? 3 : 0;
}
