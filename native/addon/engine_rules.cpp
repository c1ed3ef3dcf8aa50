// The fast path (DESIGN.md "Policy that survives"): a container's pushed policy answers its
// notifications on the engine thread, with no JS, no channel and no gRPC; whether a control plane
// is attached or not. Simple answers are sent at once; a rule's emulation (mkdir with a suffix,
// mount, kill, freeze) goes straight to its executor, journaled until it reports. The policy
// lives in the rule table and, serialized, in the fd store ("p<handle>"), so it survives a
// control plane crash, a handoff and a data plane crash.
#include <algorithm>
#include <fcntl.h>
#include <unistd.h>

#include "engine.hpp"
#include "engine_names.hpp"
#include "path_args.h"
#include "rule_arguments.hpp"

namespace seccomp_agent {
namespace {

constexpr int kFailureErrno = EPERM;  // an executor that cannot run (as engine_emulation.cpp)
// The longest a lane polls after handing a call to a helper (at most `--busy-poll`): long enough
// for a helper's mkdir and the target's next call (30-40 µs on the bench VM), short enough not to
// keep the CPU from a helper that shares it (helpers run at nice 10, and a nice-0 spin with
// sched_yield still holds them off for its whole window). At 200 µs, a target whose 200 µs timer
// restarts its mount had its calls abandoned thousands of times each (docs/emulation.md).
constexpr uint64_t kHelperPollNs = 50'000;

Answer ErrorAnswer(int err) {
  Answer a;
  a.kind = Answer::kError;
  a.error = err;
  return a;
}

// The answer a rule gives at once (continue, errno, value); false for an emulation or "ask".
bool ImmediateAnswer(const Rule& rule, Answer* out) {
  switch (rule.kind) {
    case RuleKind::kContinue:
      *out = Answer();
      return true;
    case RuleKind::kError:
      *out = ErrorAnswer(static_cast<int>(rule.value));
      return true;
    case RuleKind::kValue:
      *out = Answer();
      out->kind = Answer::kValue;
      out->value = rule.value;
      return true;
    default:
      return false;
  }
}

}  // namespace

// JS thread.
PolicyVerdict Engine::ApplyPolicy(uint32_t handle, const uint8_t* wire, size_t size, pid_t init_pid) {
  PolicyVerdict verdict;
  bool known = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    known = containers_.count(handle) != 0;
  }
  if (!known || stopped_ || handed_over_) {
    verdict.nack.reason = "unknown-handle";
    verdict.nack.detail = "no container with handle " + std::to_string(handle) + " is served here";
    std::shared_ptr<const PolicyInForce> current = rules_.RulesFor(handle);
    verdict.version = current ? current->set.version : std::string();
    return verdict;
  }
  std::shared_ptr<const PolicyInForce> before = rules_.RulesFor(handle);
  verdict = rules_.Apply(handle, wire, size);
  if (!verdict.ack) return verdict;
  std::shared_ptr<const PolicyInForce> now = rules_.RulesFor(handle);
  EnsureExecutorsFor(now->set);
  {
    // Only the engine thread frees a container, and only under mu_.
    std::lock_guard<std::mutex> lock(mu_);
    auto it = containers_.find(handle);
    if (it != containers_.end()) {
      it->second->init_pid.store(init_pid, std::memory_order_relaxed);
      it->second->has_policy.store(true, std::memory_order_release);
    }
  }
  if (before != now) KeepPolicy(handle, now->wire);  // the same policy again: nothing to keep anew
  return verdict;
}

// JS thread: the executors the rules need, made here: the engine thread never starts one.
void Engine::EnsureExecutorsFor(const RuleSet& set) {
  for (const Rule& rule : set.rules) {
    const EmulationRow* row = rule.kind == RuleKind::kEmulate ? EmulationOf(rule.emulated) : nullptr;
    if (row != nullptr) EnsureExecutor(*row);
  }
}

// JS thread.
void Engine::KeepPolicy(uint32_t handle, const std::string& wire) {
  int fd = -1;
  std::string error;
  if (!WriteSealedMemfd(wire, &fd, &error)) {
    queue_->PushError("a policy of container " + std::to_string(handle) + " is in force but not kept for a successor (" +
                      error + "): after a restart its container answers as one without policy until a control plane pushes it again");
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = containers_.find(handle);
    if (it == containers_.end()) {  // gone meanwhile (the engine thread removed it)
      close(fd);
      return;
    }
    if (it->second->policy_fd >= 0) close(it->second->policy_fd);
    it->second->policy_fd = fd;
  }
  StoreFd(PolicyName(handle), fd);  // replaces the stored copy of the same name
}

// A lane, or the JS thread in Restore (`lane` null, mu_ held).
Engine::RuleVerdict Engine::ApplyRules(Lane* lane, Container* container, const Notification& n, const Event& event, size_t blob,
                                       NativeAnswer* immediate) {
  if (!container->has_policy.load(std::memory_order_acquire)) return RuleVerdict::kNone;
  const bool mu_held = lane == nullptr;
  // Restore read the arguments into lane 0's strings, before any lane runs.
  const char* strings = lane != nullptr ? lane->strings.get() : primary_->strings.get();
  std::shared_ptr<const PolicyInForce> looked_up;
  const PolicyInForce* policy;
  // Only the lane serving the container keeps its policy (lane 0 decides a predecessor's
  // notification of any container: it looks the policy up).
  if (lane != container->lane.load(std::memory_order_acquire)) {
    looked_up = rules_.RulesFor(container->handle);
    policy = looked_up.get();
  } else {
    // The lane keeps each container's policy until the table changes (generation first:
    // a change between the two reads only makes the next notification look it up again).
    const uint64_t generation = rules_.generation();
    if (container->policy_generation != generation) {
      container->policy = rules_.RulesFor(container->handle);
      container->policy_generation = generation;
    }
    policy = container->policy.get();
  }
  if (policy == nullptr) return RuleVerdict::kNone;
  PathView views[6];
  for (uint8_t k = 0; k < event.string_count; ++k) {
    const StringArg& s = event.strings[k];
    views[k] = PathView{s.index, strings + s.text.offset, s.text.length, s.truncated};
  }
  MatchInput in{n.arch, static_cast<int32_t>(n.nr), n.args, views, event.string_count};
  const int index = MatchRule(policy->set, in);
  if (index < 0) return RuleVerdict::kNone;
  const Rule& rule = policy->set.rules[static_cast<size_t>(index)];
  if (rule.kind == RuleKind::kAsk) return RuleVerdict::kNone;
  if (ImmediateAnswer(rule, &immediate->action)) {
    immediate->by = AnsweredBy::kFastPath;
    immediate->rule = index;
    return RuleVerdict::kImmediate;
  }
  // The executors are handed copies made on this thread: not in a table of the lane's own.
  if (lane != nullptr && lane->table_token.load(std::memory_order_relaxed) != 0) return RuleVerdict::kElsewhere;
  if (detailed_events_.load(std::memory_order_relaxed)) queue_->Push(event, strings, blob, false);
  if (mu_held) {
    DispatchRuleEmulationLocked(lane, container, n, rule, index, event, views);
  } else {
    std::lock_guard<std::mutex> lock(mu_);
    DispatchRuleEmulationLocked(lane, container, n, rule, index, event, views);
  }
  return RuleVerdict::kTaken;
}

// JS thread (Restore), under mu_. Of a lost id nothing is known but that it is pending: not its
// syscall, arguments or arch. A first rule that names no syscall, argument or path matches every
// notification of every ABI, and so this one.
bool Engine::AnswerLostByRules(Container* container, uint64_t id) {
  if (!container->has_policy.load(std::memory_order_acquire)) return false;
  const std::shared_ptr<const PolicyInForce> policy = rules_.RulesFor(container->handle);
  if (policy == nullptr || policy->set.rules.empty()) return false;
  const Rule& first = policy->set.rules.front();
  Answer answer;
  if (!first.any_syscall || !first.args.empty() || !first.paths.empty() || !ImmediateAnswer(first, &answer)) return false;
  int err = 0;
  const SendResult result = NotifySend(container->fd, &js_buffers_, id, answer, &err);
  PushAnswered(container->handle, id, AnsweredBy::kFastPath, answer, result, 0, false, Unseen(), 0);
  return result == SendResult::kOk;
}

// A lane, or the JS thread in Restore (null).
void Engine::AnswerRefusedEmulation(Lane* lane, Container* container, const Notification& n, const Answer& answer, int index,
                                    EmulatedKind kind) {
  int err = 0;
  const SendResult result = NotifySend(container->fd, BuffersOf(lane), n.id, answer, &err);
  const Unseen unseen = detailed_events_.load(std::memory_order_relaxed) ? Unseen() : Unseen{n.nr, n.arch};
  PushAnswered(container->handle, n.id, AnsweredBy::kFastPath, answer, result, Elapsed(n.received_ns, NowOf(lane)), false, unseen, index, kind);
  if (result == SendResult::kFailed) queue_->PushError(SendFailedText(index, n.id, container->handle, err));
}

// Under mu_.
void Engine::DispatchRuleEmulationLocked(Lane* lane, Container* container, const Notification& n, const Rule& rule, int index,
                                         const Event& event, const PathView* views) {
  const EmulationRow* row = EmulationOf(rule.emulated);
  const EmulatedKind kind = rule.emulated;
  const size_t count = event.string_count;
  // What only the rule's own arguments can refuse, answered at once as the kernel would.
  EmulatedDecision decision;
  decision.kind = kind;
  int refused = 0;
  switch (row->shape) {
    case EmulationShape::kPathCall: {
      // The path and mode the target passed (its row says where), the suffix appended when the rule has one.
      const EmulatedCall* call = EmulatedCallOf(*row, CanonicalNr(n.arch, n.nr));
      const PathView* path = call != nullptr ? PathAt(views, count, call->path) : nullptr;
      if (row->payload == RulePayload::kSuffix) {
        refused = SuffixedPath(path, rule.suffix, &decision.mkdir.path);
      } else if (path == nullptr) {
        refused = EFAULT;
      } else if (path->truncated) {
        refused = ENAMETOOLONG;
      } else {
        decision.mkdir.path.assign(path->data, path->length);
      }
      decision.mkdir.mode = call != nullptr && call->mode >= 0 ? static_cast<uint32_t>(n.args[call->mode] & 07777) : 0;
      break;
    }
    case EmulationShape::kMount:
      refused = MountFromPaths(views, count, n.args, rule.require_cap_sys_admin, &decision.mount);
      break;
    case EmulationShape::kKill:
      decision.kill.init_pid = container->init_pid.load(std::memory_order_relaxed);
      decision.error = 0;  // the caller is killed; a caller in another pid namespace is not answered
      break;
    case EmulationShape::kFreeze:
      decision.error = rule.value == 0 ? EPERM : static_cast<int>(rule.value);
      break;
  }
  if (refused == 0 && !ExecutorRunningLocked(*row)) {
    refused = kFailureErrno;
    queue_->PushError(std::string("rule ") + std::to_string(index) + " of container " + std::to_string(container->handle) +
                      " asks for an emulation whose executor is not running (see the error that said why): answered EPERM");
  }
  if (refused != 0) {
    AnswerRefusedEmulation(lane, container, n, ErrorAnswer(refused), index, kind);
    return;
  }
  // Journaled like a pending one: a crash before its executor answers leaves it to the successor.
  PendingEntry entry;
  entry.target = container;
  entry.notification = n;
  entry.journal_slot = journal_ != nullptr ? journal_->AddInFlight(n) : InFlightJournal::kNoSlot;
  // Nobody watches: its answer stands for its notification too.
  const Unseen unseen = detailed_events_.load(std::memory_order_relaxed) ? Unseen() : Unseen{n.nr, n.arch};
  DispatchEmulationLocked(entry, decision, AnsweredBy::kFastPath, index, unseen);
  // The helper answers the target; this lane stays awake for its next call (EngineLane::poll_until_ns).
  if (lane != nullptr && row->executor == EmulationExecutor::kHelperPool && options_.busy_poll_ns != 0) {
    lane->poll_until_ns = MonotonicNs() + std::min<uint64_t>(options_.busy_poll_ns, kHelperPollNs);
  }
}

}  // namespace seccomp_agent
