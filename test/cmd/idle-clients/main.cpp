// seccomp-idle-clients: idle clients of the runtime listener socket, for the ingest limit tests
// (test-only). Forks PROCESSES children (each its own SO_PEERCRED pid, with the uid given), each
// opening CONNECTIONS connections that never send a byte, and holds them until SIGTERM.
//
//   seccomp-idle-clients --socket PATH [--processes K] [--connections N] [--uid U]
//
// Prints "connected C" once every child has made its connections (C: connect(2) calls that
// succeeded, in the backlog or accepted), then waits. SIGTERM or SIGINT ends it and its children
// (they also die with it: PR_SET_PDEATHSIG). A connection the agent closes stays closed.
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "command_line.h"

namespace {

struct Options {
  std::string socket;
  long long processes = 1;
  long long connections = 1;
  long long uid = -1;
};

int Usage() {
  fprintf(stderr, "usage: seccomp-idle-clients --socket PATH [--processes K] [--connections N] [--uid U]\n");
  return 2;
}

// In a child: N connections, then report how many succeeded on `report` and wait to be killed.
[[noreturn]] void Child(const Options& options, int report) {
  prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
  if (options.uid >= 0 && (setgid(gid_t(options.uid)) != 0 || setuid(uid_t(options.uid)) != 0)) {
    perror("seccomp-idle-clients: setuid");
    _exit(1);
  }
  sockaddr_un addr;
  memset(&addr, 0, sizeof addr);
  addr.sun_family = AF_UNIX;
  memcpy(addr.sun_path, options.socket.data(), options.socket.size());
  std::vector<int> fds;
  int connected = 0;
  for (long i = 0; i < options.connections; i++) {
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) break;
    if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) {
      connected++;
      fds.push_back(fd);
    } else {
      close(fd);
    }
  }
  while (write(report, &connected, sizeof connected) < 0 && errno == EINTR) {
  }
  close(report);
  for (;;) pause();
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  command_line::Args args(argc, argv);
  while (args.Next()) {
    const char* value = args.Value();
    if (value == nullptr) return Usage();
    bool ok = true;
    if (args.Is("--socket")) options.socket = value;
    else if (args.Is("--processes")) ok = command_line::ParseDecimal(value, 1, 10000, &options.processes);
    else if (args.Is("--connections")) ok = command_line::ParseDecimal(value, 1, 1000000, &options.connections);
    else if (args.Is("--uid")) ok = command_line::ParseDecimal(value, 0, 0x7fffffff, &options.uid);
    else ok = false;
    if (!ok) return Usage();
  }
  if (options.socket.empty() || options.socket.size() >= sizeof(sockaddr_un::sun_path)) return Usage();

  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGINT);
  sigprocmask(SIG_BLOCK, &stop, nullptr);
  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC) != 0) {
    perror("seccomp-idle-clients: pipe2");
    return 1;
  }
  std::vector<pid_t> children;
  for (long k = 0; k < options.processes; k++) {
    pid_t pid = fork();
    if (pid < 0) {
      perror("seccomp-idle-clients: fork");
      break;
    }
    if (pid == 0) {
      sigprocmask(SIG_UNBLOCK, &stop, nullptr);
      close(pipe_fds[0]);
      Child(options, pipe_fds[1]);
    }
    children.push_back(pid);
  }
  close(pipe_fds[1]);
  long total = 0;
  for (size_t k = 0; k < children.size(); k++) {
    int connected = 0;
    ssize_t n = read(pipe_fds[0], &connected, sizeof connected);
    if (n < 0 && errno == EINTR) {
      k--;
      continue;
    }
    if (n != sizeof connected) break;  // a child died before reporting
    total += connected;
  }
  printf("connected %ld\n", total);
  fflush(stdout);
  int sig = 0;
  sigwait(&stop, &sig);
  for (pid_t pid : children) kill(pid, SIGKILL);
  for (pid_t pid : children) waitpid(pid, nullptr, 0);
  return 0;
}
