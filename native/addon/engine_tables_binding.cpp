// The engine's tables and constants for JS (engine_tables_binding.hpp).
#include "engine_tables_binding.hpp"

#include <dirent.h>
#include <linux/audit.h>

#include "answer_tally.hpp"
#include "event_layout.hpp"
#include "syscall_abi.h"

namespace seccomp_agent {
namespace {

// JS thread: x86_64 syscall names by number (sparse array).
Napi::Value SyscallNames(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  Napi::Array names = Napi::Array::New(env);
#define SECCOMP_AGENT_SYSCALL_NAME(nr, name) names.Set(static_cast<uint32_t>(nr), Napi::String::New(env, #name));
  SECCOMP_AGENT_SYSCALLS_X86_64(SECCOMP_AGENT_SYSCALL_NAME)
#undef SECCOMP_AGENT_SYSCALL_NAME
  return names;
}

// JS thread: each ABI's syscall names by its own number (sparse arrays; x32's without its bit):
// { x86_64, i386, x32 }.
Napi::Value SyscallTables(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  Napi::Object tables = Napi::Object::New(env);
  Napi::Array x8664 = Napi::Array::New(env);
  Napi::Array i386 = Napi::Array::New(env);
  Napi::Array x32 = Napi::Array::New(env);
#define SECCOMP_AGENT_SYSCALL_NAME(nr, name) x8664.Set(static_cast<uint32_t>(nr), Napi::String::New(env, #name));
  SECCOMP_AGENT_SYSCALLS_X86_64(SECCOMP_AGENT_SYSCALL_NAME)
#undef SECCOMP_AGENT_SYSCALL_NAME
#define SECCOMP_AGENT_SYSCALL_NAME(nr, name, canonical) i386.Set(static_cast<uint32_t>(nr), Napi::String::New(env, #name));
  SECCOMP_AGENT_SYSCALLS_I386(SECCOMP_AGENT_SYSCALL_NAME)
#undef SECCOMP_AGENT_SYSCALL_NAME
#define SECCOMP_AGENT_SYSCALL_NAME(nr, name, canonical) x32.Set(static_cast<uint32_t>(nr), Napi::String::New(env, #name));
  SECCOMP_AGENT_SYSCALLS_X32(SECCOMP_AGENT_SYSCALL_NAME)
#undef SECCOMP_AGENT_SYSCALL_NAME
  tables.Set("x86_64", x8664);
  tables.Set("i386", i386);
  tables.Set("x32", x32);
  return tables;
}

// JS thread: entries of /proc/self/fd, minus the one the listing itself opens.
Napi::Value OpenFdCount(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) {
    Napi::Error::New(env, "cannot list /proc/self/fd").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  int count = 0;
  while (struct dirent* entry = readdir(dir)) {
    if (entry->d_name[0] != '.') count++;
  }
  closedir(dir);
  return Napi::Number::New(env, count - 1);
}

}  // namespace
}  // namespace seccomp_agent

void RegisterEngineTables(Napi::Env env, Napi::Object exports) {
  using namespace seccomp_agent;
  exports.Set("syscallNames", Napi::Function::New(env, SyscallNames, "syscallNames"));
  exports.Set("openFdCount", Napi::Function::New(env, OpenFdCount, "openFdCount"));
  exports.Set("syscallTables", Napi::Function::New(env, SyscallTables, "syscallTables"));
  exports.Set("AUDIT_ARCH_X86_64", Napi::Number::New(env, static_cast<double>(AUDIT_ARCH_X86_64)));
  exports.Set("AUDIT_ARCH_I386", Napi::Number::New(env, static_cast<double>(AUDIT_ARCH_I386)));
  // The latency histogram's bounds, as the engine's tallies bucket them (answer_tally.hpp).
  Napi::Array bounds = Napi::Array::New(env, kLatencyBuckets);
  for (size_t i = 0; i < kLatencyBuckets; i++) {
    bounds.Set(static_cast<uint32_t>(i), Napi::Number::New(env, static_cast<double>(kLatencyBucketBoundsNs[i])));
  }
  exports.Set("latencyBucketsNs", bounds);
  // The event record's offsets and flags (event_layout.hpp), for dataplane/event-decoder.ts.
  Napi::Object layout = Napi::Object::New(env);
#define SECCOMP_EVENT_LAYOUT_EXPORT(name, value) layout.Set(#name, Napi::Number::New(env, event_layout::name));
  SECCOMP_EVENT_LAYOUT(SECCOMP_EVENT_LAYOUT_EXPORT)
#undef SECCOMP_EVENT_LAYOUT_EXPORT
  layout.Freeze();
  exports.Set("eventLayout", layout);
}
