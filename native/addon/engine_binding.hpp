#pragma once
#include <napi.h>
// Adds the Engine class to the exports (see dataplane/native.ts; its tables: engine_tables_binding.hpp).
void RegisterEngine(Napi::Env env, Napi::Object exports);
