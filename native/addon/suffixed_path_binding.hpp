#pragma once
#include <napi.h>
// Adds suffixedPath(path, truncated, suffix) to the exports: the engine's own SuffixedPath
// (rule_arguments.hpp) for a control plane's mkdir decision that names a suffix instead of the
// path (dataplane/decisions.ts), so the data plane builds that path one way only.
void RegisterSuffixedPath(Napi::Env env, Napi::Object exports);
