// Reads NUL-terminated strings from a notifying task's memory (process_vm_readv, /proc/pid/mem).
// The caller must check NOTIF_ID_VALID afterwards: the pid may have died and been reused.
#pragma once
#include <sys/types.h>
#include <cstddef>
#include <cstdint>

namespace seccomp_agent {

constexpr size_t kTargetPathMax = 4096;  // PATH_MAX, NUL included

struct TargetString {
  size_t length = 0;       // bytes before the NUL (or kTargetPathMax when truncated)
  bool truncated = false;  // no NUL within kTargetPathMax bytes
};

// Reads the string at `addr` of task `pid` into `buf` (kTargetPathMax bytes). Returns false for a
// NULL pointer or unreadable memory. Runs on the engine thread; no allocation, no log.
bool ReadTargetString(pid_t pid, uint64_t addr, char* buf, TargetString* out);

}  // namespace seccomp_agent
