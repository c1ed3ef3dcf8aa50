#include "rule_table.hpp"

namespace seccomp_agent {

// JS thread.
PolicyVerdict RuleTable::Apply(uint32_t handle, const uint8_t* wire, size_t size, bool check_handle) {
  PolicyVerdict verdict;
  auto next = std::make_shared<PolicyInForce>();
  uint64_t named = 0;
  const bool good = ParseContainerPolicy(wire, size, &named, &next->set, &verdict.nack);
  if (!check_handle) named = handle;
  if (good && named != handle) {
    verdict.nack.rule_index = -1;
    verdict.nack.reason = "unknown-handle";
    verdict.nack.detail = "the policy names handle " + std::to_string(named) + ", pushed for " + std::to_string(handle);
  }
  std::lock_guard<std::mutex> lock(mu_);
  auto it = sets_.find(handle);
  if (!good || named != handle) {
    verdict.version = it == sets_.end() ? std::string() : it->second->set.version;
    return verdict;
  }
  next->wire.assign(reinterpret_cast<const char*>(wire), size);
  verdict.ack = true;
  verdict.version = next->set.version;
  if (it == sets_.end() || it->second->wire != next->wire) {
    sets_[handle] = std::move(next);
    Changed();
  }
  return verdict;
}

std::shared_ptr<const PolicyInForce> RuleTable::Share(uint32_t to, uint32_t from) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = sets_.find(from);
  if (it == sets_.end()) return nullptr;
  sets_[to] = it->second;
  Changed();
  return it->second;
}

// Any thread.
std::shared_ptr<const PolicyInForce> RuleTable::RulesFor(uint32_t handle) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = sets_.find(handle);
  return it == sets_.end() ? nullptr : it->second;
}

void RuleTable::Forget(uint32_t handle) {
  std::lock_guard<std::mutex> lock(mu_);
  if (sets_.erase(handle) != 0) Changed();
}

void RuleTable::Clear() {
  std::lock_guard<std::mutex> lock(mu_);
  sets_.clear();
  Changed();
}

}  // namespace seccomp_agent
