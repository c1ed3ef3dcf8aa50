#include "event_queue.hpp"

#include <time.h>

#include <limits>

namespace seccomp_agent {
namespace {

// A batch this big goes at once: keeps JS-side conversion slices short.
constexpr size_t kBatchMaxEvents = 1024;
constexpr size_t kBatchReserve = 64;

// Property names, made once per batch instead of once per event.
struct Keys {
  explicit Keys(Napi::Env env)
#define SECCOMP_AGENT_KEY(name) name(Napi::String::New(env, #name))
      : SECCOMP_AGENT_KEY(type), SECCOMP_AGENT_KEY(handle), SECCOMP_AGENT_KEY(id), SECCOMP_AGENT_KEY(pid),
        SECCOMP_AGENT_KEY(nr), SECCOMP_AGENT_KEY(arch), SECCOMP_AGENT_KEY(ip), SECCOMP_AGENT_KEY(args),
        SECCOMP_AGENT_KEY(strings), SECCOMP_AGENT_KEY(index), SECCOMP_AGENT_KEY(value),
        SECCOMP_AGENT_KEY(truncated), SECCOMP_AGENT_KEY(forwarded), SECCOMP_AGENT_KEY(receivedNs),
        SECCOMP_AGENT_KEY(by), SECCOMP_AGENT_KEY(action), SECCOMP_AGENT_KEY(kind), errno_(Napi::String::New(env, "errno")),
        SECCOMP_AGENT_KEY(gone), SECCOMP_AGENT_KEY(latencyNs), SECCOMP_AGENT_KEY(conn), SECCOMP_AGENT_KEY(json),
        SECCOMP_AGENT_KEY(fds), SECCOMP_AGENT_KEY(seccomp), SECCOMP_AGENT_KEY(peer), SECCOMP_AGENT_KEY(uid),
        SECCOMP_AGENT_KEY(gid), SECCOMP_AGENT_KEY(code), SECCOMP_AGENT_KEY(message),
        t_notification(Napi::String::New(env, "notification")), t_answered(Napi::String::New(env, "answered")),
        t_connection(Napi::String::New(env, "connection")), t_ingest_error(Napi::String::New(env, "ingest-error")),
        t_removed(Napi::String::New(env, "removed")), t_error(Napi::String::New(env, "error")),
        k_continue(Napi::String::New(env, "continue")), k_error(Napi::String::New(env, "error")),
        by_none(Napi::String::New(env, "no-control-plane")), by_deadline(Napi::String::New(env, "deadline")),
        by_detached(Napi::String::New(env, "detached")) {}
#undef SECCOMP_AGENT_KEY
  Napi::String type, handle, id, pid, nr, arch, ip, args, strings, index, value, truncated, forwarded, receivedNs, by,
      action, kind, errno_, gone, latencyNs, conn, json, fds, seccomp, peer, uid, gid, code, message;
  Napi::String t_notification, t_answered, t_connection, t_ingest_error, t_removed, t_error;
  Napi::String k_continue, k_error, by_none, by_deadline, by_detached;
};

Napi::String Text(Napi::Env env, const Batch& batch, TextRef ref) {
  return Napi::String::New(env, batch.arena.data() + ref.offset, ref.length);
}

Napi::Object PeerObject(Napi::Env env, const Keys& k, const Peer& peer) {
  Napi::Object o = Napi::Object::New(env);
  o.Set(k.pid, Napi::Number::New(env, peer.pid));
  o.Set(k.uid, Napi::Number::New(env, peer.uid));
  o.Set(k.gid, Napi::Number::New(env, peer.gid));
  return o;
}

Napi::Object ActionObject(Napi::Env env, const Keys& k, const Answer& action) {
  Napi::Object o = Napi::Object::New(env);
  if (action.kind == Answer::kError) {
    o.Set(k.kind, k.k_error);
    o.Set(k.errno_, Napi::Number::New(env, action.error));
  } else {
    o.Set(k.kind, k.k_continue);
  }
  return o;
}

Napi::Object ToJs(Napi::Env env, const Keys& k, const Batch& batch, const Event& e) {
  Napi::Object o = Napi::Object::New(env);
  switch (e.type) {
    case EventType::kNotification: {
      o.Set(k.type, k.t_notification);
      o.Set(k.handle, Napi::Number::New(env, e.handle));
      o.Set(k.id, Napi::BigInt::New(env, e.id));
      o.Set(k.pid, Napi::Number::New(env, e.pid));
      o.Set(k.nr, Napi::Number::New(env, e.nr));
      o.Set(k.arch, Napi::Number::New(env, e.arch));
      o.Set(k.ip, Napi::BigInt::New(env, e.ip));
      Napi::Array args = Napi::Array::New(env, 6);
      for (uint32_t i = 0; i < 6; i++) args.Set(i, Napi::BigInt::New(env, e.args[i]));
      o.Set(k.args, args);
      Napi::Array strings = Napi::Array::New(env, e.string_count);
      for (uint32_t i = 0; i < e.string_count; i++) {
        Napi::Object s = Napi::Object::New(env);
        s.Set(k.index, Napi::Number::New(env, e.strings[i].index));
        s.Set(k.value, Text(env, batch, e.strings[i].text));
        s.Set(k.truncated, Napi::Boolean::New(env, e.strings[i].truncated));
        strings.Set(i, s);
      }
      o.Set(k.strings, strings);
      o.Set(k.forwarded, Napi::Boolean::New(env, e.forwarded));
      o.Set(k.receivedNs, Napi::BigInt::New(env, e.ns));
      break;
    }
    case EventType::kAnswered:
      o.Set(k.type, k.t_answered);
      o.Set(k.handle, Napi::Number::New(env, e.handle));
      o.Set(k.id, Napi::BigInt::New(env, e.id));
      o.Set(k.by, e.by == AnsweredBy::kDeadline   ? k.by_deadline
                  : e.by == AnsweredBy::kDetached ? k.by_detached
                                                  : k.by_none);
      o.Set(k.action, ActionObject(env, k, e.action));
      o.Set(k.gone, Napi::Boolean::New(env, e.gone));
      o.Set(k.latencyNs, Napi::BigInt::New(env, e.ns));
      break;
    case EventType::kConnection: {
      o.Set(k.type, k.t_connection);
      o.Set(k.conn, Napi::Number::New(env, e.conn));
      o.Set(k.json, Text(env, batch, e.text));
      Napi::Array fds = Napi::Array::New(env, e.fd_count);
      for (uint32_t i = 0; i < e.fd_count; i++) {
        Napi::Object f = Napi::Object::New(env);
        f.Set(k.seccomp, Napi::Boolean::New(env, (e.seccomp_mask >> i) & 1u));
        fds.Set(i, f);
      }
      o.Set(k.fds, fds);
      o.Set(k.peer, PeerObject(env, k, e.peer));
      break;
    }
    case EventType::kIngestError:
      o.Set(k.type, k.t_ingest_error);
      o.Set(k.code, Napi::String::New(env, e.code != nullptr ? e.code : "read-error"));
      o.Set(k.message, Text(env, batch, e.text));
      o.Set(k.peer, PeerObject(env, k, e.peer));
      break;
    case EventType::kRemoved:
      o.Set(k.type, k.t_removed);
      o.Set(k.handle, Napi::Number::New(env, e.handle));
      break;
    case EventType::kError:
      o.Set(k.type, k.t_error);
      o.Set(k.message, Text(env, batch, e.text));
      break;
  }
  return o;
}

}  // namespace

uint64_t MonotonicNs() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

EventQueue::EventQueue(size_t max_queued, uint64_t batch_delay_ns)
    : max_queued_(max_queued), batch_delay_ns_(batch_delay_ns) {}

EventQueue::~EventQueue() { delete current_; }

bool EventQueue::Init(Napi::Env env, Napi::Function on_events) {
  sink_ = new EventSink();
  EventSink* sink = sink_;
  tsfn_ = Tsfn::New(env, on_events, "seccomp-agent-events", 0, 1, sink,
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
  size_t queued = (current_ != nullptr ? current_->events.size() : 0) +
                  (sink_ != nullptr ? sink_->in_flight.load(std::memory_order_relaxed) : 0);
  if (!open_ || queued >= max_queued_) {
    dropped_.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  if (current_ == nullptr) {
    current_ = new Batch();
    current_->events.reserve(kBatchReserve);
  }
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
  return true;
}

void EventQueue::PushError(const std::string& message) {
  Event event;
  event.type = EventType::kError;
  event.text.length = static_cast<uint32_t>(message.size());
  Push(event, message.data(), message.size(), true);
}

bool EventQueue::Full() {
  std::lock_guard<std::mutex> lock(mu_);
  size_t queued = (current_ != nullptr ? current_->events.size() : 0) +
                  (sink_ != nullptr ? sink_->in_flight.load(std::memory_order_relaxed) : 0);
  return !open_ || queued >= max_queued_;
}

uint64_t EventQueue::DueNs() {
  std::lock_guard<std::mutex> lock(mu_);
  if (current_ == nullptr || current_->events.empty()) return std::numeric_limits<uint64_t>::max();
  if (urgent_ || current_->events.size() >= kBatchMaxEvents) return 0;
  return first_ns_ + batch_delay_ns_;
}

void EventQueue::Flush(uint64_t now_ns) {
  std::lock_guard<std::mutex> lock(mu_);
  if (current_ == nullptr || current_->events.empty()) return;
  if (now_ns != 0 && !urgent_ && current_->events.size() < kBatchMaxEvents && now_ns < first_ns_ + batch_delay_ns_)
    return;
  FlushLocked();
}

// Under mu_: the order of NonBlockingCall calls is the order JS sees, so it stays under the lock.
void EventQueue::FlushLocked() {
  Batch* batch = current_;
  current_ = nullptr;
  urgent_ = false;
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

// JS thread (or teardown with env == nullptr): converts the batch, calls onEvents, frees it.
void EventQueue::CallJs(Napi::Env env, Napi::Function on_events, EventSink* sink, Batch* batch) {
  if (batch == nullptr) return;
  if (sink != nullptr) sink->in_flight.fetch_sub(batch->events.size(), std::memory_order_relaxed);
  if (env == nullptr || on_events.IsEmpty()) {
    delete batch;
    return;
  }
  // At environment teardown Node still drains the queue with a live env that can no longer run
  // JS; node-addon-api (exceptions disabled) would turn the first failed call into a fatal error.
  // Probe with a plain N-API call that checks exactly that, and drop the batch if it fails.
  napi_value probe;
  if (napi_create_object(env, &probe) != napi_ok || napi_set_named_property(env, probe, "p", probe) != napi_ok) {
    delete batch;
    return;
  }
  {
    Napi::HandleScope scope(env);
    Keys keys(env);
    Napi::Array array = Napi::Array::New(env, batch->events.size());
    for (size_t i = 0; i < batch->events.size(); i++) {
      array.Set(static_cast<uint32_t>(i), ToJs(env, keys, *batch, batch->events[i]));
    }
    delete batch;
    batch = nullptr;
    // onEvents must not throw; if it does, the exception stays pending and Node reports it as
    // uncaught, like any exception from a callback.
    on_events.Call({array});
  }
}

}  // namespace seccomp_agent
