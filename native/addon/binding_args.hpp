// JS values to the engine's types for the addon's bindings, and a policy in force back to JS.
// Each parser returns false with a TypeError or RangeError pending on the env when the value is
// malformed (no C++ exception: NAPI_DISABLE_CPP_EXCEPTIONS). JS thread only.
#pragma once
#include <napi.h>
#include <stdint.h>

#include <memory>
#include <string>

#include "engine.hpp"

namespace seccomp_agent {

void ThrowType(Napi::Env env, const std::string& message);
void ThrowRange(Napi::Env env, const std::string& message);

// An optional number property >= min; left as it is when absent.
bool OptionalNumber(Napi::Object obj, const char* name, double min, double* out);
// An errno from 1 to 4095.
bool ParseErrno(Napi::Env env, Napi::Value v, int32_t* out);
// {kind:'continue'} | {kind:'error', errno} | (allow_value) {kind:'value', value: bigint}
bool ParseAnswer(Napi::Env env, Napi::Value v, bool allow_value, Answer* out);
// A path-like property as the bytes the kernel gets (a Uint8Array as given, a string as UTF-8);
// no NUL bytes.
bool ParseBytes(Napi::Object obj, const char* name, std::string* out);
// An integer property in [min, max].
bool ParseInteger(Napi::Object obj, const char* name, double min, double max, double* out);
// The emulated kinds (mkdir, mount, kill, freeze). *matched is false when `kind` is none of them
// (the caller tries the immediate kinds).
bool ParseEmulated(Napi::Env env, Napi::Object obj, const std::string& kind, bool* matched, Engine::EmulatedDecision* out);
// A container handle or other uint32 named `what` in the error.
bool ParseUint32(Napi::Env env, Napi::Value v, const char* what, uint32_t* out);
// A session number: an integer from `min` to 2^53-1 (JS numbers stay exact).
bool ParseSession(Napi::Env env, Napi::Value v, const char* what, double min, uint64_t* out);

// A policy in force as JS sees it (NativePolicyState), or null.
Napi::Value PolicyState(Napi::Env env, const std::shared_ptr<const PolicyInForce>& policy);

}  // namespace seccomp_agent
