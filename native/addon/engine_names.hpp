// The names the engine gives what it keeps in the fd store ("n<handle>" notify fds, "records",
// "p<handle>" policies), and the errno text of its messages. Pure, header-only (test/cmd/native-tests).
#pragma once
#include <string.h>

#include <cstdint>
#include <string>

namespace seccomp_agent {

inline std::string NotifyName(uint32_t handle) { return "n" + std::to_string(handle); }
// One memfd per container's record: what 0.1.0 keeps and reads, and what a successor
// that does not read kRecordsName is handed.
inline std::string RecordName(uint32_t handle) { return "r" + std::to_string(handle); }
// Every container's record in one memfd (record_file.hpp).
constexpr const char* kRecordsName = "records";
// The serialized ContainerPolicy in force (rule_table.hpp), so a successor answers from it too.
inline std::string PolicyName(uint32_t handle) { return "p" + std::to_string(handle); }

// "n123" -> 123 for prefix 'n'; 0 when it is not such a name.
inline uint32_t HandleOfName(const std::string& name, char prefix) {
  if (name.size() < 2 || name.size() > 11 || name[0] != prefix) return 0;
  uint64_t value = 0;
  for (size_t i = 1; i < name.size(); i++) {
    if (name[i] < '0' || name[i] > '9') return 0;
    value = value * 10 + static_cast<uint64_t>(name[i] - '0');
  }
  return value > 0 && value <= UINT32_MAX ? static_cast<uint32_t>(value) : 0;
}

inline std::string ErrnoText(int err) { return std::string(strerror(err)); }
// The message of a NOTIF_SEND that failed (other than ENOENT) for an answer the engine gave by
// itself: rule `rule`'s, or the default action (rule < 0).
inline std::string SendFailedText(int32_t rule, uint64_t id, uint32_t handle, int err) {
  const std::string what = rule < 0 ? std::string("the default action") : "rule " + std::to_string(rule) + "'s answer";
  return "NOTIF_SEND of " + what + " for notification " + std::to_string(id) + " of container " + std::to_string(handle) +
         " failed: " + ErrnoText(err);
}

}  // namespace seccomp_agent
