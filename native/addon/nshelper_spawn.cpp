// Starting and reaping one emulation helper process (nshelper_spawn.hpp).
#include "nshelper_spawn.hpp"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "nshelper_protocol.h"
#include "replay_book.h"

#ifndef P_PIDFD
#define P_PIDFD 3
#endif

namespace seccomp_agent {

void ReapHelperProcess(int pidfd, bool block) {
  siginfo_t info = {};
  while (waitid(idtype_t(P_PIDFD), id_t(pidfd), &info, WEXITED | (block ? 0 : WNOHANG)) != 0 && errno == EINTR) {
  }
}

bool StartHelperProcess(const HelperCommand& command, HelperProcess* out, int* err) {
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) {
    *err = errno;
    return false;
  }
  int flags = fcntl(sv[0], F_GETFL);
  if (flags < 0 || fcntl(sv[0], F_SETFL, flags | O_NONBLOCK) != 0) {
    *err = errno;
    close(sv[0]);
    close(sv[1]);
    return false;
  }
  const bool book = command.book_fd >= 0 && command.book_partition >= 0;
  posix_spawn_file_actions_t actions;
  posix_spawnattr_t attr;
  posix_spawn_file_actions_init(&actions);
  posix_spawnattr_init(&attr);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  // Its error messages go where ours do. A descriptor left closed at 1 or 2 is the first the helper
  // opens (/proc, a book's lock), where a message written to it would land. dup2 onto itself
  // clears close-on-exec (POSIX.1-2017), which Node sets on its own stdio.
  if (fcntl(2, F_GETFD) >= 0) {
    posix_spawn_file_actions_adddup2(&actions, 2, 2);
  } else {
    posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
  }
  posix_spawn_file_actions_adddup2(&actions, sv[1], nshelper::kSocketFd);
  posix_spawn_file_actions_adddup2(&actions, command.replies_fd, nshelper::kRepliesFd);
  if (book) posix_spawn_file_actions_adddup2(&actions, command.book_fd, replay_book::kBookFd);
  posix_spawn_file_actions_addclosefrom_np(&actions, book ? replay_book::kBookFd + 1 : nshelper::kRepliesFd + 1);
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &all);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  const std::string busy_poll = "--busy-poll-us=" + std::to_string(command.busy_poll_us);
  const char* mode = command.once ? "--once" : busy_poll.c_str();
  const std::string partition = "--book-partition=" + std::to_string(command.book_partition);
  const std::string timeout = "--request-timeout-ms=" + std::to_string(command.request_timeout_ms);
  const std::string nice = "--nice=" + std::to_string(command.nice);
  char* argv[] = {const_cast<char*>(command.helper_path.c_str()), const_cast<char*>(mode),
                  const_cast<char*>(timeout.c_str()), const_cast<char*>(nice.c_str()),
                  book ? const_cast<char*>(partition.c_str()) : nullptr, nullptr};
  char* envp[] = {nullptr};
  pid_t pid = -1;
  int rc = posix_spawn(&pid, command.helper_path.c_str(), &actions, &attr, argv, envp);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  close(sv[1]);
  if (rc != 0) {
    *err = rc;
    close(sv[0]);
    return false;
  }
  int pidfd = int(syscall(SYS_pidfd_open, pid, 0));
  if (pidfd < 0) {
    // Our own unreaped child: its pid cannot have been reused, so a bare kill is safe here.
    *err = errno;
    kill(pid, SIGKILL);
    while (waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
    }
    close(sv[0]);
    return false;
  }
  out->pid = pid;
  out->pidfd = pidfd;
  out->sock = sv[0];
  return true;
}

}  // namespace seccomp_agent
