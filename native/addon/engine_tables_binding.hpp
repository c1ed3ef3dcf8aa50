// The engine's tables and constants for JS (dataplane/native.ts): syscall names per ABI, the audit
// arches, the latency histogram's bounds, the event record's layout, and the open-fd count tests use.
#pragma once
#include <napi.h>

void RegisterEngineTables(Napi::Env env, Napi::Object exports);
