// Starting and reaping one emulation helper process (native/tools/nshelper.cpp), the way the pool
// (nshelper_pool.hpp) needs it: posix_spawn (never a fork of this multi-threaded process), stdin
// and stdout /dev/null, our stderr, its socket at fd 3, its reply ring at fd 4, its replay book
// partition at fd 5, nothing else inherited, no signal blocked or handled, and a pidfd to kill and
// reap it by.
#pragma once
#include <stdint.h>
#include <sys/types.h>

#include <string>

namespace seccomp_agent {

struct HelperCommand {
  std::string helper_path;
  bool once = false;          // `--once`: one request, then exit; else kept, polling busy_poll_us
  uint32_t busy_poll_us = 0;
  uint32_t request_timeout_ms = 0;
  int nice = 0;
  int replies_fd = -1;        // its reply ring (nshelper_replies.hpp), given at fd 4
  int book_fd = -1;           // the replay book, given at fd 5 (-1: none)
  int book_partition = -1;    // its partition for this helper (with book_fd)
};

struct HelperProcess {
  pid_t pid = -1;
  int pidfd = -1;
  int sock = -1;  // ours: SOCK_SEQPACKET, nonblocking, close-on-exec
};

// False with *err (an errno) when it could not start; nothing is left open or running then.
bool StartHelperProcess(const HelperCommand& command, HelperProcess* out, int* err);

// Waits (or, not `block`, looks once) for the exit of a helper known to be exiting, and reaps it.
void ReapHelperProcess(int pidfd, bool block);

}  // namespace seccomp_agent
