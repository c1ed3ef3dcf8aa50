// Reads a serialized ContainerPolicy (proto/seccompagent/v1/policy.proto) into a RuleSet, and
// checks it once, here: every rule the engine later matches is known to be valid. A policy that
// is not is refused whole with the rule and the reason (the NACK), and the previous one stays.
// The bytes are what the control plane sent, kept verbatim in the container's record, so a
// successor data plane reads them with the same code. JS thread (push, restore).
#pragma once
#include <stddef.h>
#include <stdint.h>

#include <string>

#include "rule_set.hpp"

namespace seccomp_agent {

struct PolicyNack {
  int rule_index = -1;  // -1: the policy as a whole
  std::string reason;   // "unknown-syscall", "bad-errno", ... (policy.proto PolicyAck.reason)
  std::string detail;
};

// Limits that keep one profile or one control plane from costing others (bytes and counts).
constexpr size_t kPolicyMaxBytes = 1 << 20;
constexpr size_t kPolicyMaxRules = 1024;
constexpr size_t kPolicyMaxMatchers = 16;
constexpr size_t kPolicyMaxLabels = 64;
constexpr size_t kPolicyMaxString = 4096;

// False with `nack` set when the bytes are not a valid policy. `handle` is field 1.
bool ParseContainerPolicy(const uint8_t* data, size_t size, uint64_t* handle, RuleSet* out, PolicyNack* nack);

// Canonical number (syscall_abi.h) of an x86_64, i386 or x32 syscall name, or -1.
int SyscallNumberNamed(const std::string& name);

}  // namespace seccomp_agent
