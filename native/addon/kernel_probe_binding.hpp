#pragma once
#include <napi.h>
// Adds probeKernel to the exports (see dataplane/native.ts).
void RegisterKernelProbe(Napi::Env env, Napi::Object exports);
