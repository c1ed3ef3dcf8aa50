// The emulator facade: mkdir/mkdirat (and the path calls like it) and mount inside a target's mount
// namespace, root and cwd, done by the helper processes of nshelper_pool.hpp. Pure C++ (no N-API):
// the engine calls this directly with the notify fd it owns; the JS binding (test/cmd/emulator-addon,
// a test-only addon) is a thin shell over it for tests and the bench. See docs/emulation.md.
#pragma once
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>

#include <memory>
#include <string>

#include "action_result.hpp"

namespace seccomp_agent {

class NsHelperPool;
class ReplayBookFile;

// The arguments of a path call (mkdir, and each emulation of that shape in emulation_table.hpp).
struct MkdirArgs {
  int dirfd = AT_FDCWD;  // mkdirat: the target's own fd number (args[0]); mkdir: AT_FDCWD
  std::string path;      // as the target would pass it (the control plane may have rewritten it)
  uint32_t mode = 0777;  // before the target's umask
};

struct MountArgs {
  std::string source, target, fstype, data;
  uint64_t flags = 0;  // MS_*; bind, move, remount and propagation changes are refused (EPERM)
  bool require_cap_sys_admin = false;
};

struct EmulatorOptions {
  std::string helper_path;  // build/Release/seccomp-nshelper
  bool spawn_per_call = false;
  size_t max_helpers = 64;
  uint32_t request_timeout_ms = 10000;
  uint32_t idle_timeout_ms = 60000;
  uint32_t busy_poll_us = 0;  // NsHelperPoolOptions::busy_poll_us
  int failure_errno = EPERM;  // answer when no helper could act (respond=true)
  ReplayBookFile* replay_book = nullptr;  // NsHelperPoolOptions::replay_book
};

struct EmulatorStats {
  uint64_t helpers = 0, spawned = 0, died = 0, timed_out = 0, in_flight = 0, retried = 0;
};

class Emulator {
 public:
  // Starts the helper pool's thread (no helper yet: they start on first use). nullptr + *error
  // when the helper binary is missing.
  static std::unique_ptr<Emulator> Create(const EmulatorOptions& options, std::string* error);
  ~Emulator();

  // Any thread. `done` runs exactly once on the emulator's thread (inline, kFailed/ECANCELED, after
  // Stop). respond=true: the notification is answered by the emulator (the helper sends -err right
  // after acting, so the target wakes without a hop back; failure_errno when no helper could act),
  // and the engine only records the result. respond=false: the engine answers with result.err.
  void Mkdir(const NotificationRef& ref, const MkdirArgs& args, bool respond, ActionDone done);
  // Any thread. A helper operation `op` (nshelper::Op) of the path-call shape (mkdir and those
  // like it, emulation_table.hpp): a dirfd, a path and a mode. Mkdir is PathCall(kOpMkdir, ...).
  void PathCall(uint16_t op, const NotificationRef& ref, const MkdirArgs& args, bool respond, ActionDone done);
  void Mount(const NotificationRef& ref, const MountArgs& args, bool respond, ActionDone done);
  // Any thread. The container is gone (its notify fd hung up): its helper exits.
  void Forget(uint64_t owner);
  // Any thread. Kills the helpers, fails what is queued (ECANCELED), joins. Idempotent.
  // `let_go`: after a handoff, nothing killed or answered (NsHelperPool::Stop).
  void Stop(bool let_go = false);
  EmulatorStats Stats() const;

 private:
  Emulator() = default;
  std::unique_ptr<NsHelperPool> pool_;
  int failure_errno_ = EPERM;
};

}  // namespace seccomp_agent
