// The addon's entry point: registers each JS-visible part. Per-addon state lives in the parts'
// own instance data, so the addon can be loaded in several threads of one process.
#include <napi.h>

#include "emulation_table_binding.hpp"
#include "engine_binding.hpp"
#include "engine_tables_binding.hpp"
#include "fd_store_binding.hpp"
#include "handoff_binding.hpp"
#include "kernel_probe_binding.hpp"
#include "suffixed_path_binding.hpp"

static Napi::Object Init(Napi::Env env, Napi::Object exports) {
  RegisterEmulationTable(env, exports);
  RegisterEngine(env, exports);
  RegisterEngineTables(env, exports);
  RegisterFdStore(env, exports);
  RegisterHandoff(env, exports);
  RegisterKernelProbe(env, exports);
  RegisterSuffixedPath(env, exports);
  return exports;
}

NODE_API_MODULE(seccomp_agent, Init)
