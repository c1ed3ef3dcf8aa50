#pragma once
#include <napi.h>
// Adds the emulated actions (mkdir, mount, kill, freeze) to the exports.
void RegisterEmulator(Napi::Env env, Napi::Object exports);
