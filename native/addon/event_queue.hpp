// Events from the native side to JS, in batches through ONE thread-safe function. Producers (the
// engine thread, and the JS thread when it answers by itself) append fixed-size records under a
// short lock; text (paths, JSON, messages) goes to one arena per batch, so an event costs no
// allocation of its own. Nothing here ever blocks on JS: past maxQueuedEvents events are dropped
// and counted.
#pragma once
#include <napi.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "event.hpp"

namespace seccomp_agent {

struct Batch {
  std::vector<Event> events;
  std::string arena;
};

// Shared with the JS-side callback; outlives the queue until the TSFN finalizer.
struct EventSink {
  ~EventSink();
  std::atomic<size_t> in_flight{0};  // events handed to the TSFN, not yet converted
  // Delivered batches, emptied with their capacity kept: a fresh batch per flush meant a fresh
  // allocation (and, freed on the JS thread, an munmap whose TLB shootdown interrupts the engine's
  // CPU) every few milliseconds under load.
  std::mutex pool_mu;
  std::vector<Batch*> pool;
  Batch* Take();
  void Give(Batch* batch);
};

class EventQueue {
 public:
  EventQueue(size_t max_queued, uint64_t batch_delay_ns);
  ~EventQueue();

  // JS thread. Creates the thread-safe function that ends in `on_batch` (event_delivery.hpp:
  // the JS decoder); unref'd so it never keeps the process alive. Returns false with a JS
  // exception pending on failure.
  bool Init(Napi::Env env, Napi::Function on_batch);

  // Any thread. Copies `event`, rebasing its TextRefs from `blob` into the batch arena. `urgent`:
  // JS must react (forwarded notification, connection...): the batch is due at once. Returns false
  // when the queue is full (the event is dropped and counted).
  bool Push(const Event& event, const char* blob, size_t blob_len, bool urgent);
  bool Push(const Event& event, bool urgent) { return Push(event, nullptr, 0, urgent); }
  // Any thread. Pushes an 'error' event with `message`.
  void PushError(const std::string& message);

  // Any thread, no lock. CLOCK_MONOTONIC ns at which the current batch must go (UINT64_MAX:
  // nothing queued).
  uint64_t DueNs() const { return due_ns_.load(std::memory_order_acquire); }
  uint64_t batch_delay_ns() const { return batch_delay_ns_; }
  // Any thread. Hands the current batch to JS if it is due at `now_ns` (0: unconditionally). Takes
  // no lock when it is not due: the engine thread asks once per loop iteration.
  void Flush(uint64_t now_ns = 0);
  // Whether a new event would be dropped: engine thread, before it commits to forwarding.
  bool Full() { return !HasRoom(1); }
  // Whether `count` more events would all be queued.
  bool HasRoom(size_t count);
  // Counts events that were never pushed (lost for want of room elsewhere) as dropped.
  void CountDropped(uint64_t count) { dropped_.fetch_add(count, std::memory_order_relaxed); }

  // JS thread (Stop). Flushes and releases the thread-safe function; later pushes are dropped.
  void Close();

  uint64_t dropped() const { return dropped_.load(std::memory_order_relaxed); }

 private:
  static void CallJs(Napi::Env env, Napi::Function on_batch, EventSink* sink, Batch* batch);
  using Tsfn = Napi::TypedThreadSafeFunction<EventSink, Batch, EventQueue::CallJs>;
  void FlushLocked();
  void UpdateDueLocked();
  size_t QueuedLocked() const;

  const size_t max_queued_;
  const uint64_t batch_delay_ns_;
  std::mutex mu_;
  Batch* current_ = nullptr;  // guarded by mu_
  bool urgent_ = false;       // guarded by mu_
  uint64_t first_ns_ = 0;     // guarded by mu_: when the first event of current_ arrived
  // What DueNs() says: written under mu_ whenever current_, urgent_ or first_ns_ change.
  std::atomic<uint64_t> due_ns_{UINT64_MAX};
  bool open_ = false;         // guarded by mu_
  Tsfn tsfn_;
  EventSink* sink_ = nullptr;  // owned by the TSFN once Init succeeded
  std::atomic<uint64_t> dropped_{0};
};

}  // namespace seccomp_agent
