// The event record as JS receives it (one batch: a uint64 word array, a uint32 word array, the
// texts, and one buffer of bytes): every offset and flag bit by name, in one place. The encoder
// (event_encoder.cpp) writes by these names; the addon exports them all as `eventLayout`, and the
// TypeScript decoder (dataplane/event-decoder.ts) reads them from there once per engine.
// A new Watch field: a row here, a line in EncodeEvent, a line in the decoder.
#pragma once
#include <cstdint>

#include "event.hpp"
#include "notify_fd.hpp"  // Answer::Kind

// X(NAME, value): each constant once; JS sees eventLayout.NAME. Word offsets are indexes into
// the event's own words (event i's uint64 words start at i * W64_WORDS, its uint32 words at
// i * W32_WORDS).
#define SECCOMP_EVENT_LAYOUT(X)                                                                  \
  /* uint64 words per event, and each one's use */                                               \
  X(W64_WORDS, 10)                                                                               \
  X(W64_ID, 0)      /* notification id; tally: the count */                                      \
  X(W64_VALUE, 1)   /* notification: ip; answered: the answer's value */                         \
  X(W64_ARGS, 2)    /* notification: args[0..5], six words */                                    \
  X(W64_NS, 8)      /* notification: receivedNs; answered: latencyNs; tally: the latency sum */  \
  X(W64_SESSION, 9) /* notification, decision-dropped, session-drained, channel */               \
  /* uint32 words per event, and each one's use */                                               \
  X(W32_WORDS, 16)                                                                               \
  X(W32_TYPE, 0)         /* a TYPE_ below */                                                     \
  X(W32_HANDLE, 1)       /* the container's handle; connection, handoff: conn */                 \
  X(W32_PID, 2)          /* notification: pid; connection, ingest-error, handoff: peer pid */    \
  X(W32_NR, 3)           /* nr; peer uid */                                                      \
  X(W32_ARCH, 4)         /* arch; peer gid */                                                    \
  X(W32_FLAGS, 5)        /* FLAG_ bits and fields */                                             \
  X(W32_ERRNO, 6)        /* answered: errno; decision-dropped: a DROP_ reason */                 \
  X(W32_COUNT, 7)        /* notification: string args; connection: fds; tally: buckets;          \
                            answered: the rule's index + 1 (0: no rule) */                       \
  X(W32_TEXT, 8)         /* the event's first text in the batch's texts */                      \
  X(W32_SECCOMP_MASK, 9) /* connection: bit i set when fd i is a seccomp notify fd */            \
  X(W32_STRING_ARGS, 10) /* notification: one ARG_ word per string argument, six at most */      \
  /* W32_FLAGS: bits, and three byte-wide fields (answered, tally) */                            \
  X(FLAG_FORWARDED, 1u << 0)    /* notification */                                              \
  X(FLAG_GONE, 1u << 1)         /* answered, tally */                                           \
  X(FLAG_VIA_CHANNEL, 1u << 2)  /* notification */                                              \
  X(FLAG_CONNECTED, 1u << 3)    /* channel */                                                   \
  X(FLAG_NOTIFIED, 1u << 4)     /* answered: stands for its notification too (nr, arch) */      \
  X(FLAG_RETURNED, 1u << 5)     /* read-stall: the read returned (else it was taken over) */    \
  X(FLAG_FIELD_MASK, 0xffu)                                                                      \
  X(FLAG_BY_SHIFT, 8)           /* the API's AnsweredBy number */                               \
  X(FLAG_ANSWER_KIND_SHIFT, 16) /* an ANSWER_ kind */                                           \
  X(FLAG_EMULATED_SHIFT, 24)    /* the emulation table's kind (0: none) */                      \
  /* A string argument's word: its bytes are the next `length` bytes of the batch's buffer */    \
  X(ARG_INDEX_MASK, 0xffu)                                                                       \
  X(ARG_TRUNCATED, 1u << 8)                                                                      \
  X(ARG_LENGTH_SHIFT, 16)                                                                        \
  /* W32_TYPE */                                                                                 \
  X(TYPE_CONNECTION, static_cast<uint32_t>(EventType::kConnection))                              \
  X(TYPE_INGEST_ERROR, static_cast<uint32_t>(EventType::kIngestError))                           \
  X(TYPE_NOTIFICATION, static_cast<uint32_t>(EventType::kNotification))                          \
  X(TYPE_ANSWERED, static_cast<uint32_t>(EventType::kAnswered))                                  \
  X(TYPE_REMOVED, static_cast<uint32_t>(EventType::kRemoved))                                    \
  X(TYPE_ERROR, static_cast<uint32_t>(EventType::kError))                                        \
  X(TYPE_DECISION_DROPPED, static_cast<uint32_t>(EventType::kDecisionDropped))                   \
  X(TYPE_SESSION_DRAINED, static_cast<uint32_t>(EventType::kSessionDrained))                     \
  X(TYPE_CHANNEL, static_cast<uint32_t>(EventType::kChannel))                                    \
  X(TYPE_HANDOFF, static_cast<uint32_t>(EventType::kHandoff))                                    \
  X(TYPE_TALLY, static_cast<uint32_t>(EventType::kTally))                                        \
  X(TYPE_READ_STALL, static_cast<uint32_t>(EventType::kReadStall))                               \
  /* FLAG_ANSWER_KIND_SHIFT's field */                                                           \
  X(ANSWER_CONTINUE, static_cast<uint32_t>(Answer::kContinue))                                   \
  X(ANSWER_ERROR, static_cast<uint32_t>(Answer::kError))                                         \
  X(ANSWER_VALUE, static_cast<uint32_t>(Answer::kValue))                                         \
  /* W32_ERRNO of decision-dropped */                                                            \
  X(DROP_UNKNOWN, static_cast<uint32_t>(DropReason::kUnknown))                                   \
  X(DROP_LATE, static_cast<uint32_t>(DropReason::kLate))                                         \
  X(DROP_WRONG_SESSION, static_cast<uint32_t>(DropReason::kWrongSession))                        \
  X(DROP_INVALID, static_cast<uint32_t>(DropReason::kInvalid))

namespace seccomp_agent {
namespace event_layout {

#define SECCOMP_EVENT_LAYOUT_CONSTANT(name, value) constexpr uint32_t name = value;
SECCOMP_EVENT_LAYOUT(SECCOMP_EVENT_LAYOUT_CONSTANT)
#undef SECCOMP_EVENT_LAYOUT_CONSTANT

static_assert(W64_ARGS + 6 <= W64_SESSION && W64_SESSION < W64_WORDS, "the uint64 words fit the record");
static_assert(W32_STRING_ARGS + 6 <= W32_WORDS, "six string arguments fit the record");

}  // namespace event_layout
}  // namespace seccomp_agent
