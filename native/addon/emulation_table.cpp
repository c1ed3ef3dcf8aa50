#include "emulation_table.hpp"

#include "nshelper_protocol.h"
#include "path_args.h"

namespace seccomp_agent {

// One row per emulation. Adding one: docs/emulation.md, "Adding an emulation".
const EmulationRow kEmulations[] = {
    {EmulatedKind::kMkdir, "mkdir", "mkdir", "decision.mkdir", 4, RulePayload::kSuffix,
     {{kSys_mkdir, -1, 0, 1}, {kSys_mkdirat, 0, 1, 2}},
     EmulationShape::kPathCall, EmulationExecutor::kHelperPool, nshelper::kOpMkdir},
    {EmulatedKind::kMount, "mount", "mount", "decision.mount", 5, RulePayload::kCapSysAdmin,
     {{kSys_mount, -1, 1, -1}, {}},
     EmulationShape::kMount, EmulationExecutor::kHelperPool, nshelper::kOpMount},
    {EmulatedKind::kKill, "kill", "kill-container", "decision.kill", 6, RulePayload::kNothing,
     {{}, {}},
     EmulationShape::kKill, EmulationExecutor::kActionWorker, 0},
    {EmulatedKind::kFreeze, "freeze", "freeze-container", "decision.freeze", 7, RulePayload::kErrno,
     {{}, {}},
     EmulationShape::kFreeze, EmulationExecutor::kActionWorker, 0},
};
const size_t kEmulationCount = sizeof kEmulations / sizeof kEmulations[0];

namespace {

const char* SyscallName(int nr) {
  switch (nr) {
#define SECCOMP_AGENT_SYSCALL_NAME(number, name) \
  case number:                                   \
    return #name;
    SECCOMP_AGENT_SYSCALLS_X86_64(SECCOMP_AGENT_SYSCALL_NAME)
#undef SECCOMP_AGENT_SYSCALL_NAME
  }
  return "?";
}

}  // namespace

const EmulationRow* EmulationOf(EmulatedKind kind) {
  const size_t i = static_cast<size_t>(kind);
  if (i == 0 || i > kEmulationCount) return nullptr;
  return &kEmulations[i - 1];
}

const EmulationRow* EmulationNamed(const std::string& name) {
  for (size_t i = 0; i < kEmulationCount; ++i) {
    if (name == kEmulations[i].name) return &kEmulations[i];
  }
  return nullptr;
}

const EmulationRow* EmulationOfRuleAction(uint32_t field) {
  for (size_t i = 0; i < kEmulationCount; ++i) {
    if (kEmulations[i].rule_action == field) return &kEmulations[i];
  }
  return nullptr;
}

const EmulatedCall* EmulatedCallOf(const EmulationRow& row, int nr) {
  for (const EmulatedCall& call : row.calls) {
    if (call.nr >= 0 && call.nr == nr) return &call;
  }
  return nullptr;
}

bool AnswersAnySyscall(const EmulationRow& row) {
  for (const EmulatedCall& call : row.calls) {
    if (call.nr >= 0) return false;
  }
  return true;
}

std::string EmulatedSyscallNames(const EmulationRow& row, const char* conjunction) {
  std::string out;
  for (const EmulatedCall& call : row.calls) {
    if (call.nr < 0) continue;
    if (!out.empty()) out += conjunction;
    out += SyscallName(call.nr);
  }
  return out;
}

const char* EmulatedTitle(EmulatedKind kind) {
  const EmulationRow* row = EmulationOf(kind);
  return row != nullptr ? row->title : "none";
}

}  // namespace seccomp_agent
