#include "emulator_binding.hpp"
// Placeholder until the emulator lands.
void RegisterEmulator(Napi::Env, Napi::Object) {}
