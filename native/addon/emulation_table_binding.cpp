#include "emulation_table_binding.hpp"

#include "emulation_table.hpp"

namespace seccomp_agent {
namespace {

// JS thread. [{kind, name, title, feature, ruleAction, syscalls, calls, executor, helperOp}] in kind order.
Napi::Value Emulations(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  Napi::Array rows = Napi::Array::New(env, kEmulationCount);
  for (size_t i = 0; i < kEmulationCount; ++i) {
    const EmulationRow& row = kEmulations[i];
    Napi::Object o = Napi::Object::New(env);
    o.Set("kind", Napi::Number::New(env, static_cast<double>(row.kind)));
    o.Set("name", Napi::String::New(env, row.name));
    o.Set("title", Napi::String::New(env, row.title));
    o.Set("feature", Napi::String::New(env, row.feature));
    o.Set("ruleAction", Napi::Number::New(env, row.rule_action));
    const std::string names = EmulatedSyscallNames(row, ",");
    Napi::Array syscalls = Napi::Array::New(env);
    for (size_t start = 0; start < names.size();) {
      size_t end = names.find(',', start);
      if (end == std::string::npos) end = names.size();
      syscalls.Set(syscalls.Length(), Napi::String::New(env, names.substr(start, end - start)));
      start = end + 1;
    }
    o.Set("syscalls", syscalls);
    // Where each syscall's arguments are (-1: none), so common/emulations.ts's twin is held to them.
    Napi::Array calls = Napi::Array::New(env);
    for (const EmulatedCall& call : row.calls) {
      if (call.nr < 0) continue;
      Napi::Object c = Napi::Object::New(env);
      c.Set("syscall", syscalls.Get(calls.Length()));  // the names above are the calls' in order
      c.Set("dirfd", Napi::Number::New(env, call.dirfd));
      c.Set("path", Napi::Number::New(env, call.path));
      c.Set("mode", Napi::Number::New(env, call.mode));
      calls.Set(calls.Length(), c);
    }
    o.Set("calls", calls);
    o.Set("executor", Napi::String::New(env, row.executor == EmulationExecutor::kHelperPool ? "helper-pool" : "action-worker"));
    o.Set("helperOp", Napi::Number::New(env, row.helper_op));
    rows.Set(static_cast<uint32_t>(i), o);
  }
  return rows;
}

}  // namespace
}  // namespace seccomp_agent

void RegisterEmulationTable(Napi::Env env, Napi::Object exports) {
  exports.Set("emulations", Napi::Function::New(env, seccomp_agent::Emulations, "emulations"));
}
