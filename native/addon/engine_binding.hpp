#pragma once
#include <napi.h>
// Adds Engine, syscallNames, syscallTables, openFdCount, AUDIT_ARCH_X86_64 and AUDIT_ARCH_I386 to the exports (see dataplane/native.ts).
void RegisterEngine(Napi::Env env, Napi::Object exports);
