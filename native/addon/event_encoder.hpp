// Writes native events as the records of event_layout.hpp: the pure half of handing a batch to
// JS (no N-API, so the native tests encode a batch too; event_delivery.cpp is the other half).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "event.hpp"

namespace seccomp_agent {

// Bytes of the batch arena (or a static string): one text or one run of raw bytes.
using EventBytes = std::pair<const char*, size_t>;

// Any thread. Fills one record: W64_WORDS words at `w64`, W32_WORDS words at `w32` (zeroed by the
// caller); appends the event's texts to *texts and its raw bytes (a notification's string
// arguments, a tally's buckets) to *raws, both in the order the decoder reads them.
void EncodeEvent(const Event& e, const std::string& arena, uint64_t* w64, uint32_t* w32,
                 std::vector<EventBytes>* texts, std::vector<EventBytes>* raws);

}  // namespace seccomp_agent
