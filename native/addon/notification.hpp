// The one record of a notification, from the kernel to both transports: NOTIF_RECV fills it once
// (NotificationFromKernel); the pending table, the journal (its InFlight is this record), the event
// for JS and the decision channel's frame are all made from it, by the converters beside each
// boundary (event.hpp: NotificationEvent; journal.cpp: its slot layout). Pure: no N-API.
#pragma once
#include <linux/seccomp.h>
#include <time.h>

#include <cstdint>

#include "monotonic_clock.h"  // MonotonicNs, for received_ns
#include "syscall_abi.h"

namespace seccomp_agent {

struct Notification {
  uint32_t handle = 0;  // the engine's container handle
  uint64_t id = 0;      // the kernel's id, unique per filter
  uint32_t pid = 0;     // the notifying task, in the data plane's pid namespace
  uint32_t nr = 0;      // syscall number for `arch`
  uint32_t arch = 0;    // AUDIT_ARCH_*
  uint64_t ip = 0;      // instruction pointer
  uint64_t args[6] = {0, 0, 0, 0, 0, 0};  // i386: zero-extended 32-bit values
  uint64_t received_ns = 0;  // CLOCK_MONOTONIC when received (restored ones: when taken back); not journaled
};

// Any thread: the record of what NOTIF_RECV returned for container `handle`.
inline Notification NotificationFromKernel(const struct seccomp_notif& n, uint32_t handle, uint64_t received_ns) {
  Notification record;
  record.handle = handle;
  record.id = n.id;
  record.pid = n.pid;
  record.nr = static_cast<uint32_t>(n.data.nr);
  record.arch = n.data.arch;
  record.ip = n.data.instruction_pointer;
  // i386: the low halves only, as the kernel reads them (syscall_abi.h, ArgOfAbi).
  for (int i = 0; i < 6; i++) record.args[i] = ArgOfAbi(n.data.arch, n.data.args[i]);
  record.received_ns = received_ns;
  return record;
}

}  // namespace seccomp_agent
