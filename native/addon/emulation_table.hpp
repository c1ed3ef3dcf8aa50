// One row per emulated action (docs/emulation.md, "Adding an emulation"): its name, feature, the
// syscalls it answers and where their arguments are, the policy.proto action that asks for it,
// and who performs it. Every place that used to switch on the kind reads this table instead: the
// decision check, respond()'s parsing, the policy wire, the engine's one dispatch and the addon's
// `emulations()` (which test/unit/emulations.test.ts holds against common/emulations.ts, the
// twin the event decoder takes its names from). Pure C++ (no N-API), any thread.
#pragma once
#include <stddef.h>
#include <stdint.h>

#include <string>

namespace seccomp_agent {

// The emulated action of a decision, a rule or an 'answered' event (kNone: a plain answer). The
// number is what an 'answered' event carries (event_layout.hpp, FLAG_EMULATED_SHIFT).
enum class EmulatedKind : uint8_t { kNone, kMkdir, kMount, kKill, kFreeze };

// Who performs it: a helper process in the target's mount namespace (nshelper_pool.hpp), or the
// engine's action thread (action_worker.hpp).
enum class EmulationExecutor : uint8_t { kHelperPool, kActionWorker };

// What a decision carries and how the executor is called with it.
enum class EmulationShape : uint8_t {
  kPathCall,  // a path (the decision's, or the rule's from the notification), a mode and the
              // notification's dirfd: Emulator::PathCall(helper_op, ...)
  kMount,     // source, target, fstype, flags, data: Emulator::Mount
  kKill,      // the container's init, a signal: ActionWorker::Kill
  kFreeze,    // ActionWorker::Freeze
};

// What a rule's action message (policy.proto RuleAction) carries in its field 1.
enum class RulePayload : uint8_t {
  kNothing,
  kSuffix,       // bytes appended to the path's last component (Rule::suffix)
  kCapSysAdmin,  // bool (Rule::require_cap_sys_admin)
  kErrno,        // the errno the syscall gets once the action is done (Rule::value, 0 to 4095)
};

// One syscall an emulation answers, with its arguments' indexes (-1: none).
struct EmulatedCall {
  int nr = -1;        // canonical (native/common/syscall_abi.h): x86_64's number, also i386's and x32's call of that name
  int8_t dirfd = -1;  // none: AT_FDCWD
  int8_t path = -1;
  int8_t mode = -1;
};

constexpr size_t kMaxEmulatedCalls = 2;

struct EmulationRow {
  EmulatedKind kind;
  const char* name;      // decisions and 'answered' events ({kind: 'mkdir'}); the proto's oneof case
  const char* title;     // messages ("kill-container")
  const char* feature;   // Hello/Welcome feature ("decision.mkdir")
  uint32_t rule_action;  // policy.proto RuleAction's field number
  RulePayload payload;
  EmulatedCall calls[kMaxEmulatedCalls];  // nr -1: unused; none at all: any syscall, any arch
  EmulationShape shape;
  EmulationExecutor executor;
  uint16_t helper_op;  // nshelper::Op for the helper pool; 0 for the action worker
};

// The table, in EmulatedKind order (kEmulations[i].kind == EmulatedKind(i + 1)).
extern const EmulationRow kEmulations[];
extern const size_t kEmulationCount;

// nullptr for kNone (or a number past the table).
const EmulationRow* EmulationOf(EmulatedKind kind);
// By the name decisions use ("mkdir"); nullptr when none has it.
const EmulationRow* EmulationNamed(const std::string& name);
// By policy.proto RuleAction's field number; nullptr when that field is no emulation.
const EmulationRow* EmulationOfRuleAction(uint32_t field);
// The row's call for canonical syscall `nr` (CanonicalNr(arch, nr)); nullptr when it does not answer `nr`.
const EmulatedCall* EmulatedCallOf(const EmulationRow& row, int nr);
// True when the row names no syscall (kill, freeze: any notification).
bool AnswersAnySyscall(const EmulationRow& row);
// The row's syscalls for messages, joined by `conjunction` ("mkdir and mkdirat").
std::string EmulatedSyscallNames(const EmulationRow& row, const char* conjunction);
// For messages: the row's title, "none" for kNone.
const char* EmulatedTitle(EmulatedKind kind);

}  // namespace seccomp_agent
