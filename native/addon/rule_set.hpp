// One container's compiled policy (proto/seccompagent/v1/policy.proto, ContainerPolicy), as the
// engine matches it on its own thread: first matching rule wins. Pure data and a pure function,
// no allocation on the match path; parsing and validation are in policy_wire.hpp.
#pragma once
#include <stddef.h>
#include <stdint.h>

#include <bitset>
#include <map>
#include <string>
#include <vector>

#include "emulation_table.hpp"
#include "path_args.h"

namespace seccomp_agent {

// kEmulate: the rule's `emulated` row (emulation_table.hpp) performs the syscall or acts on the container.
enum class RuleKind : uint8_t { kContinue, kError, kValue, kEmulate, kAsk };

// Mirrors policy.proto's ArgOp and PathOp numbers.
enum class ArgOp : uint8_t { kEq = 1, kNe, kLt, kLe, kGt, kGe, kMaskedEq };
enum class PathOp : uint8_t { kEqual = 1, kPrefix };

struct ArgMatch {
  uint8_t index = 0;
  ArgOp op = ArgOp::kEq;
  uint64_t value = 0;
  uint64_t value_two = 0;
};

struct PathMatch {
  uint8_t index = 0;
  PathOp op = PathOp::kEqual;
  std::string value;  // bytes
};

struct Rule {
  bool any_syscall = true;                       // no syscall named: every syscall of every ABI
  std::bitset<kCanonicalSyscallLimit> syscalls;  // by canonical number (syscall_abi.h): x86_64's, i386's, x32's
  std::vector<ArgMatch> args;
  std::vector<PathMatch> paths;
  RuleKind kind = RuleKind::kContinue;
  EmulatedKind emulated = EmulatedKind::kNone;  // kEmulate: which one
  int64_t value = 0;               // kError, a RulePayload::kErrno emulation (freeze): errno; kValue: the return value
  bool require_cap_sys_admin = false;  // a RulePayload::kCapSysAdmin emulation (mount)
  std::string suffix;              // a RulePayload::kSuffix emulation (mkdir): bytes appended to the last component
  std::string origin;              // for people: where the rule came from
};

struct RuleSet {
  std::string version;
  std::vector<Rule> rules;
  std::map<std::string, std::string> labels;
};

// A path argument as the engine read it from the target (bytes, not NUL-terminated).
struct PathView {
  uint8_t index = 0;
  const char* data = nullptr;
  uint32_t length = 0;
  bool truncated = false;
};

// The notification as the matcher sees it (args: i386's already 32-bit, NotificationFromKernel).
struct MatchInput {
  uint32_t arch = 0;
  int32_t nr = 0;  // for `arch` (x32: with its bit)
  const uint64_t* args = nullptr;  // six
  const PathView* paths = nullptr;
  size_t path_count = 0;
};

// Index of the first rule of `set` that matches, or -1. Any thread; reads only.
int MatchRule(const RuleSet& set, const MatchInput& in);

// Where mkdir's and mkdirat's path is (0, 1), -1 for other syscalls (`canonical`: syscall_abi.h).
int MkdirPathIndex(int canonical);

}  // namespace seccomp_agent
