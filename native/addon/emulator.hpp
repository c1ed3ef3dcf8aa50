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
#include "nshelper_pool.hpp"

namespace seccomp_agent {

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

// The emulator is a facade over the helper pool: its options and counters are the pool's.
using EmulatorOptions = NsHelperPoolOptions;
using EmulatorStats = NsHelperPoolStats;

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
