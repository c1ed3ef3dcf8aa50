#include "rule_set.hpp"

#include <linux/audit.h>
#include <string.h>

namespace seccomp_agent {
namespace {

bool ArgHolds(const ArgMatch& m, uint64_t arg) {
  switch (m.op) {
    case ArgOp::kEq: return arg == m.value;
    case ArgOp::kNe: return arg != m.value;
    case ArgOp::kLt: return arg < m.value;
    case ArgOp::kLe: return arg <= m.value;
    case ArgOp::kGt: return arg > m.value;
    case ArgOp::kGe: return arg >= m.value;
    case ArgOp::kMaskedEq: return (arg & m.value) == m.value_two;
  }
  return false;
}

// A path that was not read (NULL pointer, unreadable, truncated) never matches: a rule about a
// path must not answer for a path nobody saw whole.
bool PathHolds(const PathMatch& m, const MatchInput& in) {
  for (size_t i = 0; i < in.path_count; ++i) {
    const PathView& p = in.paths[i];
    if (p.index != m.index) continue;
    if (p.truncated) return false;
    if (m.op == PathOp::kEqual) return p.length == m.value.size() && memcmp(p.data, m.value.data(), p.length) == 0;
    return p.length >= m.value.size() && memcmp(p.data, m.value.data(), m.value.size()) == 0;
  }
  return false;
}

bool RuleMatches(const Rule& r, int canonical, const MatchInput& in) {
  if (!r.any_syscall) {
    if (canonical < 0 || !r.syscalls.test(static_cast<size_t>(canonical))) return false;
  }
  for (const ArgMatch& m : r.args) {
    if (!ArgHolds(m, in.args[m.index])) return false;
  }
  for (const PathMatch& m : r.paths) {
    if (!PathHolds(m, in)) return false;
  }
  return true;
}

}  // namespace

int MatchRule(const RuleSet& set, const MatchInput& in) {
  // Names were resolved to canonical numbers: i386's mkdir (39) and x32's (0x40000053) are x86_64's 83.
  const int canonical = CanonicalNr(in.arch, static_cast<uint32_t>(in.nr));
  for (size_t i = 0; i < set.rules.size(); ++i) {
    if (RuleMatches(set.rules[i], canonical, in)) return static_cast<int>(i);
  }
  return -1;
}

int MkdirPathIndex(int canonical) {
  if (canonical == kSys_mkdir) return 0;
  if (canonical == kSys_mkdirat) return 1;
  return -1;
}

}  // namespace seccomp_agent
