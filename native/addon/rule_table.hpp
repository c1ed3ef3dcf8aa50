// Each container's policy pushed by a control plane (DESIGN.md "Policy that survives"): the
// serialized ContainerPolicy as it came (what the fd store and a handoff keep), parsed and checked
// once by policy_wire.hpp, ACKed with the version now in force or NACKed with the rule and the
// reason, the previous version kept after a NACK (last known good). The engine thread matches
// notifications against the set in force (engine_rules.cpp). Pure C++ (no N-API); its own lock,
// so the engine thread can read while JS applies.
#pragma once
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "policy_wire.hpp"
#include "rule_set.hpp"

namespace seccomp_agent {

// A policy in force: its rules and the bytes they were read from.
struct PolicyInForce {
  RuleSet set;
  std::string wire;  // the serialized ContainerPolicy
};

// An ACK (`version` is now in force) or a NACK (`nack` says why; `version` is the one still in
// force, "" none).
struct PolicyVerdict {
  bool ack = false;
  std::string version;
  PolicyNack nack;
};

class RuleTable {
 public:
  // JS thread. Parses and checks `wire` for `handle`; keeps it when it is good. The same version
  // again is ACKed and changes nothing. `check_handle`: the policy must name `handle` (a push);
  // a stored one (restore) may name the sibling it was shared from.
  PolicyVerdict Apply(uint32_t handle, const uint8_t* wire, size_t size, bool check_handle = true);
  // JS thread. `to` gets the policy in force for `from` (another fd of the same container: an
  // exec inherits its init's policy, so it is answered the same way before any control plane
  // hears of it). Null when `from` has none.
  std::shared_ptr<const PolicyInForce> Share(uint32_t to, uint32_t from);
  // Any thread. The policy in force for `handle` (null: none pushed). Immutable; the pointer
  // keeps it alive across a concurrent Apply or Forget.
  std::shared_ptr<const PolicyInForce> RulesFor(uint32_t handle) const;
  // Engine thread (its container is gone) or JS thread (Stop).
  void Forget(uint32_t handle);
  void Clear();
  // Any thread, no lock. Changes on every change to any container's policy (read it before
  // RulesFor): a reader that cached a RulesFor result may keep using it while this is the same.
  uint64_t generation() const { return generation_.load(std::memory_order_acquire); }

 private:
  // Under mu_: after a change to sets_.
  void Changed() { generation_.fetch_add(1, std::memory_order_release); }

  mutable std::mutex mu_;
  std::atomic<uint64_t> generation_{0};
  std::unordered_map<uint32_t, std::shared_ptr<const PolicyInForce>> sets_;  // guarded by mu_
};

}  // namespace seccomp_agent
