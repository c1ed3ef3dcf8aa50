#include "rule_table.hpp"

#include <array>
#include <initializer_list>

#include "path_args.h"

namespace seccomp_agent {
namespace {

constexpr std::array<bool, kSyscallLimitX8664> MakeKnownSyscalls() {
  std::array<bool, kSyscallLimitX8664> known{};
#define SECCOMP_AGENT_SYSCALL_KNOWN(nr, name) known[nr] = true;
  SECCOMP_AGENT_SYSCALLS_X86_64(SECCOMP_AGENT_SYSCALL_KNOWN)
#undef SECCOMP_AGENT_SYSCALL_KNOWN
  return known;
}
constexpr std::array<bool, kSyscallLimitX8664> kKnownSyscalls = MakeKnownSyscalls();

RuleVerdict Nack(int32_t rule, NackReason reason, std::string detail) {
  RuleVerdict v;
  v.rule = rule;
  v.reason = reason;
  v.detail = std::move(detail);
  return v;
}

bool GoodErrno(int32_t e) { return e >= 1 && e <= 4095; }

// The first problem of one rule (kNone: none), with *detail.
NackReason CheckRule(const Rule& rule, std::string* detail) {
  if (rule.syscalls.empty()) {
    *detail = "names no syscall";
    return NackReason::kUnknownSyscall;
  }
  for (uint32_t nr : rule.syscalls) {
    if (nr >= static_cast<uint32_t>(kSyscallLimitX8664) || !kKnownSyscalls[nr]) {
      *detail = "syscall " + std::to_string(nr) + " is not an x86_64 syscall this data plane knows";
      return NackReason::kUnknownSyscall;
    }
  }
  for (const ArgMatcher& m : rule.args) {
    if (m.index > 5 || m.op == ArgOp::kUnspecified || m.op > ArgOp::kMaskedEq) {
      *detail = "argument matcher: index 0..5 and an op are required";
      return NackReason::kBadArgument;
    }
  }
  for (const PathMatcher& m : rule.paths) {
    bool read = true;
    for (uint32_t nr : rule.syscalls) read = read && m.index <= 5 && ((PathArgMask(static_cast<int>(nr)) >> m.index) & 1u) != 0;
    if (!read || m.match == PathMatch::kUnspecified || m.match > PathMatch::kPrefix) {
      *detail = "path matcher: argument " + std::to_string(m.index) + " is not a path the engine reads for every syscall of the rule";
      return NackReason::kBadPath;
    }
  }
  auto only = [&rule](std::initializer_list<int> allowed) {
    for (uint32_t nr : rule.syscalls) {
      bool ok = false;
      for (int a : allowed) ok = ok || nr == static_cast<uint32_t>(a);
      if (!ok) return false;
    }
    return true;
  };
  switch (rule.action) {
    case RuleAction::kContinue:
    case RuleAction::kValue:
    case RuleAction::kAsk:
      return NackReason::kNone;
    case RuleAction::kErrno:
    case RuleAction::kKillContainer:
    case RuleAction::kFreezeContainer:
      if (rule.action == RuleAction::kErrno ? !GoodErrno(rule.error) : (rule.error != 0 && !GoodErrno(rule.error))) {
        *detail = "errno " + std::to_string(rule.error) + " is outside 1..4095";
        return NackReason::kBadErrno;
      }
      return NackReason::kNone;
    case RuleAction::kMkdir:
      if (!only({kSys_mkdir, kSys_mkdirat})) {
        *detail = "an emulated mkdir answers only mkdir and mkdirat";
        return NackReason::kUnsupportedAction;
      }
      return NackReason::kNone;
    case RuleAction::kMount:
      if (!only({kSys_mount})) {
        *detail = "an emulated mount answers only mount";
        return NackReason::kUnsupportedAction;
      }
      return NackReason::kNone;
    case RuleAction::kUnspecified:
      break;
  }
  *detail = "no action (or one this data plane does not know)";
  return NackReason::kUnsupportedAction;
}

}  // namespace

const char* NackReasonName(NackReason reason) {
  switch (reason) {
    case NackReason::kNone: return "none";
    case NackReason::kStaleVersion: return "stale-version";
    case NackReason::kUnknownSyscall: return "unknown-syscall";
    case NackReason::kBadErrno: return "bad-errno";
    case NackReason::kUnsupportedAction: return "unsupported-action";
    case NackReason::kBadArgument: return "bad-argument";
    case NackReason::kBadPath: return "bad-path";
  }
  return "unknown";
}

RuleVerdict RuleTable::Validate(const RuleSet& set) {
  for (size_t i = 0; i < set.rules.size(); i++) {
    std::string detail;
    NackReason reason = CheckRule(set.rules[i], &detail);
    if (reason != NackReason::kNone) return Nack(static_cast<int32_t>(i), reason, "rule " + std::to_string(i) + ": " + detail);
  }
  RuleVerdict ok;
  ok.ack = true;
  return ok;
}

RuleVerdict RuleTable::Apply(uint32_t handle, RuleSet set) {
  RuleVerdict verdict = Validate(set);
  std::lock_guard<std::mutex> lock(mu_);
  auto it = sets_.find(handle);
  const uint64_t in_force = it != sets_.end() ? it->second->version : 0;
  if (verdict.ack && it != sets_.end() && set.version < in_force) {
    verdict = Nack(-1, NackReason::kStaleVersion,
                   "version " + std::to_string(set.version) + " is older than " + std::to_string(in_force) + ", in force");
  }
  if (!verdict.ack) {
    verdict.version = in_force;
    return verdict;
  }
  verdict.version = set.version;
  if (it != sets_.end() && set.version == in_force) return verdict;
  sets_[handle] = std::make_shared<const RuleSet>(std::move(set));
  return verdict;
}

std::shared_ptr<const RuleSet> RuleTable::RulesFor(uint32_t handle) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = sets_.find(handle);
  return it == sets_.end() ? nullptr : it->second;
}

void RuleTable::Forget(uint32_t handle) {
  std::shared_ptr<const RuleSet> gone;  // freed outside the lock
  std::lock_guard<std::mutex> lock(mu_);
  auto it = sets_.find(handle);
  if (it == sets_.end()) return;
  gone = std::move(it->second);
  sets_.erase(it);
}

void RuleTable::Clear() {
  std::lock_guard<std::mutex> lock(mu_);
  sets_.clear();
}

}  // namespace seccomp_agent
