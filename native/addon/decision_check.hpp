// Every decision, from JS respond() or from the decision channel, is checked here once before it
// answers anything, and gets one reason code; the transports only translate it (respond()'s
// status, the channel's decision-dropped reason). Pure C++ (no N-API).
#pragma once
#include <cstdint>

#include "decision_channel.h"
#include "event.hpp"
#include "notification.hpp"
#include "notify_fd.hpp"
#include "pending_table.hpp"

namespace seccomp_agent {

enum class DecisionReason : uint8_t {
  kOk,
  kUnknownId,     // not pending: answered, never received, or its container is gone
  kLate,          // its deadline answered it a moment ago
  kStaleSession,  // another session owns it (or none yet: held), or the deciding session was closed
  kBadErrno,      // an error decision whose errno is outside 1..4095
  kBadKind,       // neither continue, error nor value
  kWrongSyscall,  // an emulation for a notification of another syscall or arch (it stays pending)
};

// Any thread: a short name for logs and messages.
const char* DecisionReasonName(DecisionReason reason);

// Under the engine's mu_ (JS thread or engine thread): may a decision of `session` (0: whichever
// owns it, JS answering for itself) answer (handle, id)? *entry: the entry when kOk.
DecisionReason CheckPending(const PendingTable& table, uint32_t handle, uint64_t id, uint64_t session,
                            const PendingEntry** entry);
// Any thread: whether `answer` is one the kernel takes (errno range, kind).
DecisionReason CheckAnswer(const Answer& answer);
// Any thread: the answer a channel Decision frame carries, checked (*answer set when kOk).
DecisionReason ChannelAnswer(const decision_channel::DecisionBody& body, Answer* answer);
// Any thread: whether an emulation of `kind` can answer notification `n` (its row's x86_64
// syscalls; a row that names none, kill and freeze: any).
DecisionReason CheckEmulation(EmulatedKind kind, const Notification& n);
// The channel's decision-dropped reason for a refused decision.
DropReason DropReasonOf(DecisionReason reason);

}  // namespace seccomp_agent
