#pragma once
#include <napi.h>
// Adds Engine, syscallNames, openFdCount and AUDIT_ARCH_X86_64 to the exports (see dataplane/native.ts).
void RegisterEngine(Napi::Env env, Napi::Object exports);
