// Hands a batch of native event records to JS. Building objects through N-API costs a call per
// property (about 3 µs per notification); so the batch goes to JS as two flat typed arrays (the
// records of event_layout.hpp), the texts, and one buffer of bytes, and the TypeScript decoder
// (dataplane/event-decoder.ts) builds the objects with literals (about ten times cheaper). A
// notification's string arguments travel as bytes, since paths are bytes, not UTF-8 text.
#pragma once
#include <napi.h>

#include "event_queue.hpp"

namespace seccomp_agent {

// JS thread. Calls on_batch(words64, words32, texts, count, raw) with `batch` encoded. Uses plain
// N-API with every status checked: at environment teardown JS can no longer run and the batch is
// silently dropped.
void DeliverBatch(napi_env env, napi_value on_batch, const Batch& batch);

}  // namespace seccomp_agent
