// Turns a batch of native event records into the NativeEvent objects of dataplane/native.ts.
// Building objects through N-API costs a call per property (about 3 µs per notification); so the
// batch goes to JS as two flat typed arrays plus the strings, and a small JS function compiled
// once per engine builds the objects with literals (about ten times cheaper). A notification's
// string arguments travel as bytes (one buffer per batch; each argument a Buffer view of it), since
// paths are bytes, not UTF-8 text.
#pragma once
#include <napi.h>

#include "event_queue.hpp"

namespace seccomp_agent {

// JS thread. Returns function (words64, words32, strings, count, raw) that decodes a batch and calls
// on_events(events). Empty with a JS exception pending on failure.
Napi::Function MakeEventDecoder(Napi::Env env, Napi::Function on_events);

// JS thread. Hands `batch` to `decoder`. Uses plain N-API with every status checked: at
// environment teardown JS can no longer run and the batch is silently dropped.
void DeliverBatch(napi_env env, napi_value decoder, const Batch& batch);

}  // namespace seccomp_agent
