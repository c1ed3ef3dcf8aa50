// Conversions between the engine's C++ structs and JS objects, for engine_binding.cpp: the
// options going in, the stats and a restore's result coming out. JS thread only.
#pragma once
#include <napi.h>

#include "engine.hpp"
#include "ingest.hpp"

namespace seccomp_agent {

// new Engine(options)'s fields into `o`; false with a TypeError/RangeError thrown.
bool ParseEngineOptions(Napi::Env env, Napi::Object opts, Engine::Options* out);
// stats() as JS sees it (NativeEngineStats in dataplane/native.ts).
Napi::Object StatsObject(Napi::Env env, const Engine::Stats& s, bool fd_store, const Ingest::DropCounts& d);
// restore()'s answer: what was taken back (the containers themselves wait for
// takeRestoredContainers(), `container_count` of them).
Napi::Object RestoreObject(Napi::Env env, const Engine::RestoreResult& r, size_t container_count);

}  // namespace seccomp_agent
