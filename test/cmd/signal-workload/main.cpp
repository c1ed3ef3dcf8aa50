// seccomp-signal-workload: makes fresh directories (or tmpfs mounts) one after another while an
// interval timer keeps interrupting it, as Go's runtime does with SIGURG, and prints what each
// call returned, for the conformance tests of emulated syscalls (test/integration/
// emulation-signals.test.ts). Run it bare and under an agent: a kernel gives 0 for every fresh
// name, whatever signals come; so must the agent.
//
//   seccomp-signal-workload --dir DIR --count N [--timer-us U] [--no-restart] [--handler-mkdir]
//                           [--op mkdir|mount] [--repeat]
//
//   --timer-us U      SIGALRM every U µs (setitimer); 0: no timer
//   --no-restart      the handler is installed without SA_RESTART: an interrupted call returns
//                     EINTR, and the workload calls it again (counted)
//   --handler-mkdir   the handler itself makes a directory (DIR/h<k>) now and then
//   --repeat          after each mkdir that returned 0, the same mkdir again (a kernel says EEXIST:
//                     the program's own second call is not a restart of its first)
//   --op mount        mount a tmpfs on DIR/m<i> (made first) instead of mkdir DIR/d<i>; at the end
//                     counts the mounts on each from /proc/self/mountinfo
// Output: one JSON line {"op","calls","ok","eexist","eintr","other","firstErrno","firstFailed","signals",
// "handlerCalls","handlerOk","handlerEexist","mounts","stacked","repeats","repeatEexist"}.
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <unistd.h>

#include <map>
#include <string>

namespace {

volatile sig_atomic_t g_signals = 0;
volatile sig_atomic_t g_handler_calls = 0;
volatile sig_atomic_t g_handler_ok = 0;
volatile sig_atomic_t g_handler_eexist = 0;
bool g_handler_mkdir = false;
char g_handler_prefix[4096];
size_t g_handler_prefix_len = 0;

// Async-signal-safe: appends the decimal of `n` to `out` at `at`; returns the new length.
size_t AppendNumber(char* out, size_t at, unsigned long n) {
  char digits[24];
  size_t len = 0;
  do {
    digits[len++] = char('0' + n % 10);
    n /= 10;
  } while (n != 0);
  while (len > 0) out[at++] = digits[--len];
  out[at] = '\0';
  return at;
}

void OnAlarm(int) {
  const int saved = errno;
  g_signals = g_signals + 1;
  // A handler that makes syscalls of its own, as Go's does: one unnotified, and (every 16th
  // signal) one the agent emulates, nested inside the call the signal interrupted.
  syscall(SYS_getppid);
  if (g_handler_mkdir && g_signals % 16 == 0) {
    char path[4200];
    memcpy(path, g_handler_prefix, g_handler_prefix_len);
    AppendNumber(path, g_handler_prefix_len, static_cast<unsigned long>(g_handler_calls));
    g_handler_calls = g_handler_calls + 1;
    int rc;
    do {
      rc = mkdir(path, 0755);
    } while (rc != 0 && errno == EINTR);
    if (rc == 0) g_handler_ok = g_handler_ok + 1;
    else if (errno == EEXIST) g_handler_eexist = g_handler_eexist + 1;
  }
  errno = saved;
}

[[noreturn]] void Usage(const char* why) {
  fprintf(stderr, "seccomp-signal-workload: %s\nusage: seccomp-signal-workload --dir DIR --count N [--timer-us U] [--no-restart] [--handler-mkdir] [--op mkdir|mount] [--repeat]\n", why);
  exit(2);
}

// Mounts on each mount point below `dir`, from /proc/self/mountinfo (field 5: the mount point).
std::map<std::string, int> MountsUnder(const std::string& dir) {
  std::map<std::string, int> count;
  FILE* f = fopen("/proc/self/mountinfo", "r");
  if (f == nullptr) return count;
  char line[8192];
  while (fgets(line, sizeof line, f) != nullptr) {
    char point[4096];
    if (sscanf(line, "%*s %*s %*s %*s %4095s", point) != 1) continue;
    std::string p(point);
    if (p.compare(0, dir.size() + 1, dir + "/") == 0) count[p]++;
  }
  fclose(f);
  return count;
}

}  // namespace

int main(int argc, char** argv) {
  std::string dir;
  std::string op = "mkdir";
  long count = -1;
  long timer_us = 0;
  bool restart = true;
  bool repeat = false;
  for (int i = 1; i < argc; i++) {
    std::string arg = argv[i];
    auto value = [&]() -> const char* {
      if (i + 1 >= argc) Usage((arg + " needs a value").c_str());
      return argv[++i];
    };
    if (arg == "--dir") dir = value();
    else if (arg == "--count") count = atol(value());
    else if (arg == "--timer-us") timer_us = atol(value());
    else if (arg == "--no-restart") restart = false;
    else if (arg == "--handler-mkdir") g_handler_mkdir = true;
    else if (arg == "--op") op = value();
    else if (arg == "--repeat") repeat = true;
    else Usage(("unknown option " + arg).c_str());
  }
  if (dir.empty() || count < 0 || timer_us < 0 || (op != "mkdir" && op != "mount") || (repeat && op != "mkdir")) Usage("bad arguments");
  g_handler_prefix_len = static_cast<size_t>(snprintf(g_handler_prefix, sizeof g_handler_prefix, "%s/h", dir.c_str()));

  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = OnAlarm;
  sa.sa_flags = restart ? SA_RESTART : 0;
  sigemptyset(&sa.sa_mask);
  if (sigaction(SIGALRM, &sa, nullptr) != 0) Usage("sigaction failed");
  if (op == "mount") {
    // The mount points first, before any signal: only the mounts are measured.
    for (long i = 0; i < count; i++) {
      std::string path = dir + "/m" + std::to_string(i);
      if (mkdir(path.c_str(), 0755) != 0) Usage(("mkdir " + path + ": " + strerror(errno)).c_str());
    }
  }
  if (timer_us > 0) {
    struct itimerval it;
    it.it_interval.tv_sec = timer_us / 1000000;
    it.it_interval.tv_usec = timer_us % 1000000;
    it.it_value = it.it_interval;
    if (setitimer(ITIMER_REAL, &it, nullptr) != 0) Usage("setitimer failed");
  }
  long ok = 0, eexist = 0, eintr = 0, other = 0, first_failed = -1, repeats = 0, repeat_eexist = 0;
  int first_errno = 0;
  for (long i = 0; i < count; i++) {
    int rc;
    std::string path = dir + (op == "mount" ? "/m" : "/d") + std::to_string(i);
    for (;;) {
      rc = op == "mount" ? mount("tmpfs", path.c_str(), "tmpfs", 0, "size=64k") : mkdir(path.c_str(), 0755);
      if (rc == 0 || errno != EINTR) break;
      eintr++;
    }
    if (rc == 0) {
      ok++;
      if (repeat) {
        repeats++;
        while ((rc = mkdir(path.c_str(), 0755)) != 0 && errno == EINTR) eintr++;
        if (rc != 0 && errno == EEXIST) repeat_eexist++;
      }
    } else {
      if (first_errno == 0) {
        first_errno = errno;
        first_failed = i;
      }
      if (errno == EEXIST) eexist++;
      else other++;
    }
  }
  struct itimerval off;
  memset(&off, 0, sizeof off);
  setitimer(ITIMER_REAL, &off, nullptr);
  long mounts = 0, stacked = 0;
  if (op == "mount") {
    for (const auto& point : MountsUnder(dir)) {
      mounts += point.second;
      if (point.second > 1) stacked++;
    }
  }
  printf("{\"op\":\"%s\",\"calls\":%ld,\"ok\":%ld,\"eexist\":%ld,\"eintr\":%ld,\"other\":%ld,\"firstErrno\":%d,\"firstFailed\":%ld,\"signals\":%d,"
         "\"handlerCalls\":%d,\"handlerOk\":%d,\"handlerEexist\":%d,\"mounts\":%ld,\"stacked\":%ld,\"repeats\":%ld,\"repeatEexist\":%ld}\n",
         op.c_str(), count, ok, eexist, eintr, other, first_errno, first_failed, int(g_signals), int(g_handler_calls), int(g_handler_ok),
         int(g_handler_eexist), mounts, stacked, repeats, repeat_eexist);
  fflush(stdout);
  return 0;
}
