// Each container's rules, pushed by the control plane (DESIGN.md "Policy that survives", issue 9):
// versioned, validated here, ACKed with the version now in force or NACKed with the rule and the
// reason, the previous version kept after a NACK (last known good). This is where they land; the
// engine does not match notifications against them yet (the next step), so nothing answers from
// them today. Pure C++ (no N-API); its own lock, so the engine thread can read while JS applies.
#pragma once
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace seccomp_agent {

// What a matching rule does (the proto's enum, _UNSPECIFIED = 0 refused).
enum class RuleAction : uint8_t { kUnspecified, kContinue, kErrno, kValue, kMkdir, kMount, kKillContainer,
                                  kFreezeContainer, kAsk };
// seccomp's own argument comparisons (SCMP_CMP_*).
enum class ArgOp : uint8_t { kUnspecified, kEq, kNe, kLt, kLe, kGt, kGe, kMaskedEq };
enum class PathMatch : uint8_t { kUnspecified, kEqual, kPrefix };

struct ArgMatcher {
  uint8_t index = 0;  // 0..5
  ArgOp op = ArgOp::kUnspecified;
  uint64_t value = 0;
  uint64_t value_two = 0;  // kMaskedEq: the mask is value, the expected value value_two (as seccomp)
};

// On a path argument the engine reads (path_args.h); bytes, never text.
struct PathMatcher {
  uint8_t index = 0;
  PathMatch match = PathMatch::kUnspecified;
  std::string bytes;
};

struct Rule {
  std::vector<uint32_t> syscalls;  // x86_64 numbers (names resolved by the caller)
  std::vector<ArgMatcher> args;    // all must match
  std::vector<PathMatcher> paths;  // all must match
  RuleAction action = RuleAction::kUnspecified;
  int32_t error = 0;         // kErrno; kKillContainer, kFreezeContainer: the errno the syscall gets
  int64_t value = 0;         // kValue
  std::string mkdir_suffix;  // kMkdir: appended to the path (bytes)
  std::vector<std::string> mount_fstypes;  // kMount: the fstypes allowed
  bool mount_require_cap_sys_admin = false;
};

struct RuleSet {
  uint64_t version = 0;
  std::vector<Rule> rules;  // first match wins; no match: today's behaviour
  std::vector<std::pair<std::string, std::string>> labels;  // namespace, pod, ...: opaque here
};

enum class NackReason : uint8_t { kNone, kStaleVersion, kUnknownSyscall, kBadErrno, kUnsupportedAction,
                                  kBadArgument, kBadPath };

// An ACK (ack: `version` is now in force) or a NACK (`rule` and `reason`; `version` is the one
// still in force, 0: none).
struct RuleVerdict {
  bool ack = false;
  uint64_t version = 0;
  int32_t rule = -1;  // the index of the refused rule (-1: the set as a whole)
  NackReason reason = NackReason::kNone;
  std::string detail;
};

const char* NackReasonName(NackReason reason);

class RuleTable {
 public:
  // JS thread. Validates `set` and keeps it for `handle` when it is good. A version older than the
  // one in force is NACKed (kStaleVersion); the same version again is ACKed and changes nothing.
  RuleVerdict Apply(uint32_t handle, RuleSet set);
  // Any thread. The rules in force for `handle` (null: none pushed). The set is immutable; the
  // pointer keeps it alive across a concurrent Apply.
  std::shared_ptr<const RuleSet> RulesFor(uint32_t handle) const;
  // Engine thread (its container is gone) or JS thread (Stop).
  void Forget(uint32_t handle);
  void Clear();
  // Any thread: the first problem of `set` (ack = true when there is none; version not set).
  static RuleVerdict Validate(const RuleSet& set);

 private:
  mutable std::mutex mu_;
  std::unordered_map<uint32_t, std::shared_ptr<const RuleSet>> sets_;  // guarded by mu_
};

}  // namespace seccomp_agent
