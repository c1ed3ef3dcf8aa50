// The shared steps of the container actions: the result record and the pending re-check.
#include "action_result.hpp"

#include <sys/ioctl.h>

#include "monotonic_clock.h"
#include "seccomp_compat.h"

namespace seccomp_agent {

const char* OutcomeName(ActionOutcome outcome) {
  switch (outcome) {
    case ActionOutcome::kDone: return "done";
    case ActionOutcome::kStale: return "stale";
    case ActionOutcome::kRefused: return "refused";
    default: return "failed";
  }
}

ActionResult MakeActionResult(ActionOutcome outcome, int err, const char* stage, uint64_t start, std::string detail) {
  ActionResult r;
  r.outcome = outcome;
  r.err = err;
  if (outcome == ActionOutcome::kStale || outcome == ActionOutcome::kFailed) r.cause = err;
  r.stage = stage;
  r.detail = std::move(detail);
  r.latency_ns = MonotonicNs() - start;
  return r;
}

bool StillPending(const NotificationRef& ref) {
  uint64_t id = ref.id;
  return ioctl(ref.notify_fd, SECCOMP_IOCTL_NOTIF_ID_VALID, &id) == 0;
}

}  // namespace seccomp_agent
