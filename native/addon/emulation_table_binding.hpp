#pragma once
#include <napi.h>
// Adds emulations() to the exports: the emulation table (emulation_table.hpp) as JS sees it, so a
// test holds common/emulations.ts against it (see dataplane/native.ts, NativeEmulation).
void RegisterEmulationTable(Napi::Env env, Napi::Object exports);
