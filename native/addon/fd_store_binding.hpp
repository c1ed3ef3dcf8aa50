#pragma once
#include <napi.h>
// Adds sdNotify, fdStoreStore, fdStoreRemove, takeListenFds, watchProcessExit and unwatchProcess to
// the exports (see dataplane/native.ts).
void RegisterFdStore(Napi::Env env, Napi::Object exports);
