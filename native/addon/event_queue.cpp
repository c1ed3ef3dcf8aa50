#include "event_queue.hpp"

#include "event_delivery.hpp"

#include <time.h>

#include <limits>

namespace seccomp_agent {
namespace {

// A batch this big goes at once: keeps JS-side conversion slices short.
constexpr size_t kBatchMaxEvents = 1024;
// Batches kept for reuse (each holds kBatchMaxEvents events' room): a few cover a JS thread
// that is one or two batches behind.
constexpr size_t kPooledBatches = 4;

}  // namespace

EventSink::~EventSink() {
  for (Batch* batch : pool) delete batch;
}

Batch* EventSink::Take() {
  {
    std::lock_guard<std::mutex> lock(pool_mu);
    if (!pool.empty()) {
      Batch* batch = pool.back();
      pool.pop_back();
      return batch;
    }
  }
  Batch* batch = new Batch();
  batch->events.reserve(kBatchMaxEvents);
  return batch;
}

void EventSink::Give(Batch* batch) {
  batch->events.clear();
  batch->arena.clear();
  {
    std::lock_guard<std::mutex> lock(pool_mu);
    if (pool.size() < kPooledBatches) {
      pool.push_back(batch);
      return;
    }
  }
  delete batch;
}

EventQueue::EventQueue(size_t max_queued, uint64_t batch_delay_ns)
    : max_queued_(max_queued), batch_delay_ns_(batch_delay_ns) {}

EventQueue::~EventQueue() { delete current_; }

bool EventQueue::Init(Napi::Env env, Napi::Function on_batch) {
  sink_ = new EventSink();
  EventSink* sink = sink_;
  tsfn_ = Tsfn::New(env, on_batch, "seccomp-agent-events", 0, 1, sink,
                    [](Napi::Env, void*, EventSink* s) { delete s; });
  if (env.IsExceptionPending()) {
    delete sink;
    sink_ = nullptr;
    return false;
  }
  tsfn_.Unref(env);
  std::lock_guard<std::mutex> lock(mu_);
  open_ = true;
  return true;
}

bool EventQueue::Push(const Event& event, const char* blob, size_t blob_len, bool urgent) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!open_ || QueuedLocked() >= max_queued_) {
    dropped_.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  if (current_ == nullptr) current_ = sink_ != nullptr ? sink_->Take() : new Batch();
  if (current_->events.empty()) first_ns_ = MonotonicNs();
  uint32_t base = static_cast<uint32_t>(current_->arena.size());
  current_->events.push_back(event);
  if (blob_len > 0) {
    current_->arena.append(blob, blob_len);
    Event& stored = current_->events.back();
    stored.text.offset += base;
    for (uint8_t i = 0; i < stored.string_count; i++) stored.strings[i].text.offset += base;
  }
  if (urgent) urgent_ = true;
  UpdateDueLocked();
  return true;
}

void EventQueue::PushError(const std::string& message) {
  Event event;
  event.type = EventType::kError;
  event.text.length = static_cast<uint32_t>(message.size());
  Push(event, message.data(), message.size(), true);
}

bool EventQueue::HasRoom(size_t count) {
  std::lock_guard<std::mutex> lock(mu_);
  return open_ && QueuedLocked() + count <= max_queued_;
}

// Under mu_: events in the current batch and in batches JS has not converted yet.
size_t EventQueue::QueuedLocked() const {
  return (current_ != nullptr ? current_->events.size() : 0) +
         (sink_ != nullptr ? sink_->in_flight.load(std::memory_order_relaxed) : 0);
}

// Under mu_.
void EventQueue::UpdateDueLocked() {
  uint64_t due = std::numeric_limits<uint64_t>::max();
  if (current_ != nullptr && !current_->events.empty()) {
    due = urgent_ || current_->events.size() >= kBatchMaxEvents ? 0 : first_ns_ + batch_delay_ns_;
  }
  due_ns_.store(due, std::memory_order_release);
}

void EventQueue::Flush(uint64_t now_ns) {
  if (now_ns != 0 && now_ns < due_ns_.load(std::memory_order_acquire)) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (current_ == nullptr || current_->events.empty()) return;
  if (now_ns != 0 && now_ns < due_ns_.load(std::memory_order_relaxed)) return;
  FlushLocked();
}

// Under mu_: the order of NonBlockingCall calls is the order JS sees, so it stays under the lock.
void EventQueue::FlushLocked() {
  Batch* batch = current_;
  current_ = nullptr;
  urgent_ = false;
  UpdateDueLocked();
  if (!open_) {
    delete batch;
    return;
  }
  size_t count = batch->events.size();
  sink_->in_flight.fetch_add(count, std::memory_order_relaxed);
  if (tsfn_.NonBlockingCall(batch) != napi_ok) {
    sink_->in_flight.fetch_sub(count, std::memory_order_relaxed);
    dropped_.fetch_add(count, std::memory_order_relaxed);
    delete batch;
  }
}

void EventQueue::Close() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!open_) return;
  if (current_ != nullptr && !current_->events.empty()) FlushLocked();
  open_ = false;
  tsfn_.Release();
  sink_ = nullptr;  // the TSFN finalizer frees it
}

// JS thread (or teardown with env == nullptr): hands the batch to on_batch (the JS decoder), frees it.
void EventQueue::CallJs(Napi::Env env, Napi::Function on_batch, EventSink* sink, Batch* batch) {
  if (batch == nullptr) return;
  if (sink != nullptr) sink->in_flight.fetch_sub(batch->events.size(), std::memory_order_relaxed);
  if (env != nullptr && !on_batch.IsEmpty()) DeliverBatch(env, on_batch, *batch);
  if (sink != nullptr) {
    sink->Give(batch);
  } else {
    delete batch;
  }
}

}  // namespace seccomp_agent
