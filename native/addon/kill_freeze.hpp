// Kill and freeze of a container for a notification of its own: kill-container through a pidfd,
// freeze and thaw of the container's cgroup. Synchronous; the engine runs them on its action
// worker (action_worker.hpp). Pure C++ (no N-API); see docs/emulation.md.
#pragma once
#include <signal.h>
#include <sys/types.h>

#include "action_result.hpp"

namespace seccomp_agent {

struct KillArgs {
  // The container's init. With its own pid namespace, init is found from the target itself
  // (pid 1 there) and init_pid is ignored; in the host pid namespace init_pid is required and
  // must share the target's mount namespace. init_pidfd, when the engine holds one, wins.
  pid_t init_pid = 0;
  int init_pidfd = -1;  // borrowed
  int signal = SIGKILL;
};

// Synchronous, any thread, no fork: a few /proc reads, one ioctl, one pidfd call or one write.
// answer_errno > 0: the notification is then answered with that errno (refusals with EPERM), so
// the engine only records the result, as with respond=true; 0: the engine answers it.
ActionResult KillContainer(const NotificationRef& ref, const KillArgs& args, int answer_errno = 0);
// Freezes the target's cgroup: cgroup v2 `cgroup.freeze` when the target has a non-root v2
// cgroup, else the v1 freezer's `freezer.state`. Refuses a root cgroup and any cgroup that holds
// the data plane itself. The answer, when asked, is sent after the freeze: the target never runs
// past the call unfrozen. The v1 freezer interrupts the notified syscall at once (send_err ENOENT):
// it restarts when thawed and is notified again.
ActionResult FreezeContainer(const NotificationRef& ref, int answer_errno = 0);
// Thaws the cgroup FreezeContainer would pick for `pid` (operators and tests; no notification).
ActionResult ThawContainer(pid_t pid);

}  // namespace seccomp_agent
