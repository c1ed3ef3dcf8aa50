#include "event_delivery.hpp"

#include <string.h>

#include <vector>

#include "event_encoder.hpp"
#include "event_layout.hpp"

namespace seccomp_agent {

using namespace event_layout;

void DeliverBatch(napi_env env, napi_value on_batch, const Batch& batch) {
  const size_t count = batch.events.size();
  void* raw64 = nullptr;
  void* raw32 = nullptr;
  napi_value buf64, buf32, strings, js_count, raw_buf, result;
  if (napi_create_arraybuffer(env, count * W64_WORDS * sizeof(uint64_t), &raw64, &buf64) != napi_ok ||
      napi_create_arraybuffer(env, count * W32_WORDS * sizeof(uint32_t), &raw32, &buf32) != napi_ok) {
    return;
  }
  uint64_t* w64 = static_cast<uint64_t*>(raw64);
  uint32_t* w32 = static_cast<uint32_t*>(raw32);
  memset(w32, 0, count * W32_WORDS * sizeof(uint32_t));
  std::vector<EventBytes> texts, raws;
  texts.reserve(count);
  for (size_t i = 0; i < count; i++) EncodeEvent(batch.events[i], batch.arena, w64 + i * W64_WORDS, w32 + i * W32_WORDS, &texts, &raws);
  size_t raw_size = 0;
  for (const auto& r : raws) raw_size += r.second;
  void* raw_data = nullptr;
  if (napi_create_arraybuffer(env, raw_size, &raw_data, &raw_buf) != napi_ok) return;
  char* raw_at = static_cast<char*>(raw_data);
  for (const auto& r : raws) {
    if (r.second > 0) memcpy(raw_at, r.first, r.second);
    raw_at += r.second;
  }
  if (napi_create_array_with_length(env, texts.size(), &strings) != napi_ok) return;
  for (size_t i = 0; i < texts.size(); i++) {
    napi_value s;
    if (napi_create_string_utf8(env, texts[i].first, texts[i].second, &s) != napi_ok ||
        napi_set_element(env, strings, static_cast<uint32_t>(i), s) != napi_ok) {
      return;
    }
  }
  if (napi_create_uint32(env, static_cast<uint32_t>(count), &js_count) != napi_ok) return;
  napi_value argv[5] = {buf64, buf32, strings, js_count, raw_buf};
  napi_value global;
  if (napi_get_global(env, &global) != napi_ok) return;
  // A throw from on_batch stays pending and Node reports it as uncaught, like any callback's.
  napi_call_function(env, global, on_batch, 5, argv, &result);
}

}  // namespace seccomp_agent
