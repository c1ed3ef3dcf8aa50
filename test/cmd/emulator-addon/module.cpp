// Entry point of the test-only addon seccomp_emulator_addon.node: the emulated actions without
// the engine, and raw seccomp calls, for test/integration/emulation.test.ts and bench/.
#include <napi.h>

#include "emulator_binding.hpp"

static Napi::Object Init(Napi::Env env, Napi::Object exports) {
  RegisterEmulator(env, exports);
  return exports;
}

NODE_API_MODULE(seccomp_emulator_addon, Init)
