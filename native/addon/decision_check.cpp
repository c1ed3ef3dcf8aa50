#include "decision_check.hpp"

#include "emulation_table.hpp"
#include "seccomp_compat.h"

namespace seccomp_agent {

const char* DecisionReasonName(DecisionReason reason) {
  switch (reason) {
    case DecisionReason::kOk: return "ok";
    case DecisionReason::kUnknownId: return "unknown-id";
    case DecisionReason::kLate: return "late";
    case DecisionReason::kStaleSession: return "stale-session";
    case DecisionReason::kBadErrno: return "bad-errno";
    case DecisionReason::kBadKind: return "bad-kind";
    case DecisionReason::kWrongSyscall: return "wrong-syscall";
  }
  return "unknown";
}

DecisionReason CheckPending(const PendingTable& table, uint32_t handle, uint64_t id, uint64_t session,
                            const PendingEntry** entry) {
  *entry = table.Find(handle, id);
  if (*entry == nullptr) return table.AnsweredLate(handle, id) ? DecisionReason::kLate : DecisionReason::kUnknownId;
  if (session != 0 && ((*entry)->owner == nullptr || (*entry)->owner->id != session)) {
    *entry = nullptr;
    return DecisionReason::kStaleSession;
  }
  return DecisionReason::kOk;
}

DecisionReason CheckAnswer(const Answer& answer) {
  switch (answer.kind) {
    case Answer::kContinue:
    case Answer::kValue:
      return DecisionReason::kOk;
    case Answer::kError:
      return answer.error >= 1 && answer.error <= 4095 ? DecisionReason::kOk : DecisionReason::kBadErrno;
  }
  return DecisionReason::kBadKind;
}

DecisionReason ChannelAnswer(const decision_channel::DecisionBody& body, Answer* answer) {
  Answer a;
  switch (body.kind) {
    case decision_channel::kContinue:
      a.kind = Answer::kContinue;
      break;
    case decision_channel::kError:
      a.kind = Answer::kError;
      a.error = body.errno_value;
      break;
    case decision_channel::kValue:
      a.kind = Answer::kValue;
      a.value = body.value;
      break;
    default:
      return DecisionReason::kBadKind;
  }
  const DecisionReason reason = CheckAnswer(a);
  if (reason == DecisionReason::kOk) *answer = a;
  return reason;
}

DecisionReason CheckEmulation(EmulatedKind kind, const Notification& n) {
  const EmulationRow* row = EmulationOf(kind);
  if (row == nullptr) return DecisionReason::kBadKind;
  if (AnswersAnySyscall(*row)) return DecisionReason::kOk;
  return EmulatedCallOf(*row, CanonicalNr(n.arch, n.nr)) != nullptr
             ? DecisionReason::kOk
             : DecisionReason::kWrongSyscall;
}

DropReason DropReasonOf(DecisionReason reason) {
  switch (reason) {
    case DecisionReason::kLate: return DropReason::kLate;
    case DecisionReason::kStaleSession: return DropReason::kWrongSession;
    case DecisionReason::kUnknownId: return DropReason::kUnknown;
    default: return DropReason::kInvalid;
  }
}

}  // namespace seccomp_agent
