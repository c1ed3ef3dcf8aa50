// A native thread that takes no signals: they belong to Node's main thread (its handlers, its
// SIGCHLD for child processes). pthread_create, not std::thread: built without C++ exceptions, a
// std::thread that cannot start aborts the process; this returns pthread_create's errno.
#pragma once
#include <pthread.h>
#include <signal.h>

namespace seccomp_agent {

inline int StartQuietThread(pthread_t* thread, void* (*main)(void*), void* arg) {
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  const int rc = pthread_create(thread, nullptr, main, arg);
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  return rc;
}

}  // namespace seccomp_agent
