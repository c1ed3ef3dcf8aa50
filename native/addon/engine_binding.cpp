// The JS face of the engine (see NativeEngine in dataplane/native.ts): argument checking and
// conversion only (the parsers it shares with the other bindings: binding_args.hpp; options,
// stats and restore results: engine_binding_convert.hpp; tables: engine_tables_binding.hpp); every method
// runs on the JS thread. Bad arguments throw TypeError/RangeError; no C++ exception is involved
// (NAPI_DISABLE_CPP_EXCEPTIONS).
#include "engine_binding.hpp"

#include <node_api.h>

#include <cmath>
#include <memory>
#include <string>

#include "binding_args.hpp"
#include "engine.hpp"
#include "engine_binding_convert.hpp"
#include "seccomp_compat.h"

namespace seccomp_agent {
namespace {

class EngineWrap : public Napi::ObjectWrap<EngineWrap> {
 public:
  static Napi::Function Define(Napi::Env env) {
    return DefineClass(env, "Engine",
                       {
                           InstanceMethod<&EngineWrap::JsStart>("start"),
                           InstanceMethod<&EngineWrap::JsListen>("listen"),
                           InstanceMethod<&EngineWrap::JsListenFd>("listenFd"),
                           InstanceMethod<&EngineWrap::JsListenerPaths>("listenerPaths"),
                           InstanceMethod<&EngineWrap::JsAdopt>("adopt"),
                           InstanceMethod<&EngineWrap::JsReject>("reject"),
                           InstanceMethod<&EngineWrap::JsNameContainer>("nameContainer"),
                           InstanceMethod<&EngineWrap::JsApplyPolicy>("applyPolicy"),
                           InstanceMethod<&EngineWrap::JsPolicyOf>("policyOf"),
                           InstanceMethod<&EngineWrap::JsExplainRule>("explainRule"),
                           InstanceMethod<&EngineWrap::JsListenChannel>("listenChannel"),
                           InstanceMethod<&EngineWrap::JsOpenSession>("openSession"),
                           InstanceMethod<&EngineWrap::JsSetActiveSession>("setActiveSession"),
                           InstanceMethod<&EngineWrap::JsCloseSession>("closeSession"),
                           InstanceMethod<&EngineWrap::JsSessionPending>("sessionPending"),
                           InstanceMethod<&EngineWrap::JsSetDefaultAction>("setDefaultAction"),
                           InstanceMethod<&EngineWrap::JsSetDecisionTimeout>("setDecisionTimeout"),
                           InstanceMethod<&EngineWrap::JsRespond>("respond"),
                           InstanceMethod<&EngineWrap::JsExtendDeadline>("extendDeadline"),
                           InstanceMethod<&EngineWrap::JsStats>("stats"),
                           InstanceMethod<&EngineWrap::JsTargetWaits>("targetWaits"),
                           InstanceMethod<&EngineWrap::JsRestore>("restore"),
                           InstanceMethod<&EngineWrap::JsTakeRestoredContainers>("takeRestoredContainers"),
                           InstanceMethod<&EngineWrap::JsListenHandoff>("listenHandoff"),
                           InstanceMethod<&EngineWrap::JsSetAccepting>("setAccepting"),
                           InstanceMethod<&EngineWrap::JsSetDetailedEvents>("setDetailedEvents"),
                           InstanceMethod<&EngineWrap::JsHoldForControlPlane>("holdForControlPlane"),
                           InstanceMethod<&EngineWrap::JsHandOff>("handOff"),
                           InstanceMethod<&EngineWrap::JsStop>("stop"),
                       });
  }

  // JS thread: new Engine(options).
  explicit EngineWrap(const Napi::CallbackInfo& info) : Napi::ObjectWrap<EngineWrap>(info) {
    Napi::Env env = info.Env();
    env_ = env;
    if (!info.IsConstructCall()) return;  // ObjectWrap already threw
    if (info.Length() < 1 || !info[0].IsObject()) {
      ThrowType(env, "Engine needs an options object");
      return;
    }
    Napi::Object opts = info[0].As<Napi::Object>();
    Napi::Value on_batch = opts.Get("onBatch");
    if (env.IsExceptionPending()) return;
    if (!on_batch.IsFunction()) {
      ThrowType(env, "option onBatch must be a function (dataplane/event-decoder.ts, makeEventDecoder)");
      return;
    }
    Engine::Options o;
    if (!ParseEngineOptions(env, opts, &o)) return;

    engine_ = std::make_unique<Engine>(o);
    std::string error;
    if (!engine_->Init(env, on_batch.As<Napi::Function>(), &error)) {
      if (!env.IsExceptionPending()) Napi::Error::New(env, error).ThrowAsJavaScriptException();
      engine_.reset();
      return;
    }
    // Registered after the TSFN: hooks run last-in first-out, so Stop() still finds it alive.
    if (napi_add_env_cleanup_hook(env, &EngineWrap::CleanupHook, this) == napi_ok) hook_ = true;
  }

  // JS thread (GC finalizer).
  ~EngineWrap() override {
    if (hook_) napi_remove_env_cleanup_hook(env_, &EngineWrap::CleanupHook, this);
    if (engine_ != nullptr) engine_->Stop();
  }

 private:
  // JS thread, at environment teardown (process exit, worker end): never hangs.
  static void CleanupHook(void* arg) {
    EngineWrap* self = static_cast<EngineWrap*>(arg);
    self->hook_ = false;
    if (self->engine_ != nullptr) self->engine_->Stop();
  }

  bool Usable(Napi::Env env) {
    if (engine_ == nullptr) {
      Napi::Error::New(env, "engine was not constructed").ThrowAsJavaScriptException();
      return false;
    }
    return true;
  }

  Napi::Value JsStart(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    if (!Usable(env)) return env.Undefined();
    std::string error;
    if (!engine_->Start(&error)) Napi::Error::New(env, error).ThrowAsJavaScriptException();
    return env.Undefined();
  }

  Napi::Value JsListen(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    if (!Usable(env)) return env.Undefined();
    if (info.Length() < 2 || !info[0].IsString()) {
      ThrowType(env, "listen(socketPath, mode): socketPath must be a string");
      return env.Undefined();
    }
    uint32_t mode;
    if (!ParseUint32(env, info[1], "mode", &mode)) return env.Undefined();
    if (engine_->stopped()) {
      Napi::Error::New(env, "the engine is stopped").ThrowAsJavaScriptException();
      return env.Undefined();
    }
    std::string error;
    if (!engine_->Listen(info[0].As<Napi::String>().Utf8Value(), mode & 07777, &error)) {
      Napi::Error::New(env, error).ThrowAsJavaScriptException();
    }
    return env.Undefined();
  }

  // JS thread. The path of every listening socket served (getsockname), in the order added.
  Napi::Value JsListenerPaths(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    if (!Usable(env)) return env.Undefined();
    std::vector<std::string> paths = engine_->ingest()->ListenerPaths();
    Napi::Array list = Napi::Array::New(env, paths.size());
    for (size_t i = 0; i < paths.size(); i++) list.Set(static_cast<uint32_t>(i), Napi::String::New(env, paths[i]));
    return list;
  }

  Napi::Value JsListenFd(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    if (!Usable(env)) return env.Undefined();
    uint32_t fd;
    if (!ParseUint32(env, info[0], "fd", &fd)) return env.Undefined();
    if (engine_->stopped()) {
      Napi::Error::New(env, "the engine is stopped").ThrowAsJavaScriptException();
      return env.Undefined();
    }
    std::string error;
    if (!engine_->ingest()->ListenFd(static_cast<int>(fd), &error)) Napi::Error::New(env, error).ThrowAsJavaScriptException();
    return env.Undefined();
  }

  Napi::Value JsAdopt(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    if (!Usable(env)) return env.Undefined();
    uint32_t conn, index;
    if (!ParseUint32(env, info[0], "conn", &conn) || !ParseUint32(env, info[1], "fdIndex", &index)) return env.Undefined();
    if (!info[2].IsString()) {
      ThrowType(env, "adopt(conn, fdIndex, record): record must be a string (JSON kept for a successor)");
      return env.Undefined();
    }
    std::string container_id;
    if (info.Length() > 3 && !info[3].IsUndefined()) {
      if (!info[3].IsString()) {
        ThrowType(env, "adopt(conn, fdIndex, record, containerId): containerId must be a string");
        return env.Undefined();
      }
      container_id = info[3].As<Napi::String>().Utf8Value();
    }
    std::string error;
    bool range = false;
    uint32_t handle = engine_->Adopt(conn, index, info[2].As<Napi::String>().Utf8Value(), container_id, &error, &range);
    if (handle == 0) {
      if (range) {
        ThrowRange(env, error);
      } else {
        Napi::Error::New(env, error).ThrowAsJavaScriptException();
      }
      return env.Undefined();
    }
    return Napi::Number::New(env, handle);
  }

  Napi::Value JsNameContainer(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    if (!Usable(env)) return env.Undefined();
    uint32_t handle;
    if (!ParseUint32(env, info[0], "handle", &handle)) return env.Undefined();
    if (info.Length() < 2 || !info[1].IsString()) {
      ThrowType(env, "nameContainer(handle, containerId): containerId must be a string");
      return env.Undefined();
    }
    const Engine::Naming naming = engine_->NameContainer(handle, info[1].As<Napi::String>().Utf8Value());
    if (naming == Engine::Naming::kRefused) {
      ThrowRange(env, "nameContainer(handle, containerId): a control plane session was opened already (or the engine stopped)");
      return env.Undefined();
    }
    return Napi::Boolean::New(env, naming == Engine::Naming::kNamed);
  }

  // JS thread. policyOf(handle) -> { version, rules, labels } | null: what answers it natively.
  Napi::Value JsPolicyOf(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    if (!Usable(env)) return env.Undefined();
    uint32_t handle;
    if (!ParseUint32(env, info[0], "handle", &handle)) return env.Undefined();
    return PolicyState(env, engine_->PolicyOf(handle));
  }

  // JS thread. explainRule(handle, nr, args: bigint[] (up to 6), paths: [{ index, bytes: Uint8Array }], arch?)
  // (arch: AUDIT_ARCH_*, x86_64 when absent; nr for that arch, x32 with its bit)
  // -> { version, index, wire: Uint8Array } or null (no policy): the rule the engine's own matcher
  // picks for that call (MatchRule, as on the engine thread), and the policy it picked it from.
  Napi::Value JsExplainRule(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    if (!Usable(env)) return env.Undefined();
    uint32_t handle;
    uint32_t nr;
    uint32_t arch = AUDIT_ARCH_X86_64;
    if (!ParseUint32(env, info[0], "handle", &handle) || !ParseUint32(env, info[1], "nr", &nr)) return env.Undefined();
    if (info.Length() < 4 || !info[2].IsArray() || !info[3].IsArray()) {
      ThrowType(env, "explainRule(handle, nr, args: bigint[], paths: { index, bytes }[], arch?)");
      return env.Undefined();
    }
    if (info.Length() > 4 && !info[4].IsUndefined() && !ParseUint32(env, info[4], "arch", &arch)) return env.Undefined();
    uint64_t args[6] = {0, 0, 0, 0, 0, 0};
    Napi::Array js_args = info[2].As<Napi::Array>();
    for (uint32_t i = 0; i < js_args.Length() && i < 6; ++i) {
      Napi::Value v = js_args.Get(i);
      if (!v.IsBigInt()) {
        ThrowType(env, "explainRule: args must be bigints");
        return env.Undefined();
      }
      bool lossless = false;
      args[i] = ArgOfAbi(arch, v.As<Napi::BigInt>().Uint64Value(&lossless));  // as NotificationFromKernel
    }
    Napi::Array js_paths = info[3].As<Napi::Array>();
    PathView views[6];
    size_t count = 0;
    for (uint32_t i = 0; i < js_paths.Length() && count < 6; ++i) {
      Napi::Value v = js_paths.Get(i);
      if (!v.IsObject()) continue;
      Napi::Object o = v.As<Napi::Object>();
      Napi::Value index = o.Get("index");
      Napi::Value bytes = o.Get("bytes");
      if (!index.IsNumber() || !bytes.IsTypedArray() || bytes.As<Napi::TypedArray>().TypedArrayType() != napi_uint8_array) {
        ThrowType(env, "explainRule: each path is { index: 0..5, bytes: Uint8Array }");
        return env.Undefined();
      }
      Napi::Uint8Array b = bytes.As<Napi::Uint8Array>();
      const uint32_t at = index.As<Napi::Number>().Uint32Value();
      if (at > 5) continue;
      // Views into the caller's arrays: they live until this call returns, as MatchRule needs.
      views[count++] = PathView{static_cast<uint8_t>(at), reinterpret_cast<const char*>(b.Data()), static_cast<uint32_t>(b.ByteLength()), false};
    }
    std::shared_ptr<const PolicyInForce> policy = engine_->PolicyOf(handle);
    if (!policy) return env.Null();
    MatchInput in{arch, static_cast<int32_t>(nr), args, views, count};
    Napi::Object r = Napi::Object::New(env);
    r.Set("version", Napi::String::New(env, policy->set.version));
    r.Set("index", Napi::Number::New(env, MatchRule(policy->set, in)));
    r.Set("wire", Napi::Buffer<uint8_t>::Copy(env, reinterpret_cast<const uint8_t*>(policy->wire.data()), policy->wire.size()));
    return r;
  }

  // JS thread. applyPolicy(handle, policy: Uint8Array, initPid) -> { accepted, version, ruleIndex, reason, detail }.
  Napi::Value JsApplyPolicy(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    if (!Usable(env)) return env.Undefined();
    uint32_t handle;
    if (!ParseUint32(env, info[0], "handle", &handle)) return env.Undefined();
    if (info.Length() < 3 || !info[1].IsTypedArray() || info[1].As<Napi::TypedArray>().TypedArrayType() != napi_uint8_array ||
        !info[2].IsNumber()) {
      ThrowType(env, "applyPolicy(handle, policy: Uint8Array, initPid: number)");
      return env.Undefined();
    }
    Napi::Uint8Array bytes = info[1].As<Napi::Uint8Array>();
    const PolicyVerdict v = engine_->ApplyPolicy(handle, bytes.Data(), bytes.ByteLength(), info[2].As<Napi::Number>().Int32Value());
    Napi::Object o = Napi::Object::New(env);
    o.Set("accepted", Napi::Boolean::New(env, v.ack));
    o.Set("version", Napi::String::New(env, v.version));
    o.Set("ruleIndex", Napi::Number::New(env, v.ack ? -1 : v.nack.rule_index));
    o.Set("reason", Napi::String::New(env, v.nack.reason));
    o.Set("detail", Napi::String::New(env, v.nack.detail));
    return o;
  }

  Napi::Value JsReject(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    if (!Usable(env)) return env.Undefined();
    uint32_t conn;
    if (!ParseUint32(env, info[0], "conn", &conn)) return env.Undefined();
    // Unknown (already expired) connections are fine: there is nothing left to close.
    if (!engine_->stopped()) engine_->ingest()->Reject(conn);
    return env.Undefined();
  }

  Napi::Value JsListenChannel(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    if (!Usable(env)) return env.Undefined();
    if (info.Length() < 2 || !info[0].IsString()) {
      ThrowType(env, "listenChannel(socketPath, mode): socketPath must be a string");
      return env.Undefined();
    }
    uint32_t mode;
    if (!ParseUint32(env, info[1], "mode", &mode)) return env.Undefined();
    std::string error;
    if (!engine_->ListenChannel(info[0].As<Napi::String>().Utf8Value(), mode & 07777, &error)) {
      Napi::Error::New(env, error).ThrowAsJavaScriptException();
    }
    return env.Undefined();
  }

  Napi::Value JsOpenSession(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    if (!Usable(env)) return env.Undefined();
    uint64_t session;
    if (!ParseSession(env, info[0], "openSession", 1, &session)) return env.Undefined();
    if (info.Length() < 2 || !info[1].IsTypedArray() ||
        info[1].As<Napi::TypedArray>().TypedArrayType() != napi_uint8_array ||
        info[1].As<Napi::TypedArray>().ByteLength() != 16) {
      ThrowType(env, "openSession(session, token): token must be a Uint8Array of 16 bytes");
      return env.Undefined();
    }
    Napi::Uint8Array token = info[1].As<Napi::Uint8Array>();
    std::string error;
    if (!engine_->OpenSession(session, token.Data(), &error)) ThrowRange(env, "openSession: " + error);
    return env.Undefined();
  }

  Napi::Value JsSetActiveSession(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    if (!Usable(env)) return env.Undefined();
    uint64_t session;
    if (!ParseSession(env, info[0], "setActiveSession", 0, &session)) return env.Undefined();
    if (engine_->stopped()) return env.Undefined();
    if (!engine_->SetActiveSession(session)) {
      ThrowRange(env, "setActiveSession: session " + std::to_string(session) + " is not open (openSession first)");
    }
    return env.Undefined();
  }

  Napi::Value JsCloseSession(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    if (!Usable(env)) return env.Undefined();
    uint64_t session;
    if (!ParseSession(env, info[0], "closeSession", 1, &session)) return env.Undefined();
    return Napi::Number::New(env, static_cast<double>(engine_->CloseSession(session)));
  }

  Napi::Value JsSessionPending(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    if (!Usable(env)) return env.Undefined();
    uint64_t session;
    if (!ParseSession(env, info[0], "sessionPending", 0, &session)) return env.Undefined();
    return Napi::Number::New(env, static_cast<double>(engine_->SessionPending(session)));
  }

  Napi::Value JsSetDefaultAction(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    if (!Usable(env)) return env.Undefined();
    Answer action;
    if (!ParseAnswer(env, info[0], false, &action)) return env.Undefined();
    engine_->SetDefaultAction(action);
    return env.Undefined();
  }

  Napi::Value JsSetDecisionTimeout(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    if (!Usable(env)) return env.Undefined();
    if (info.Length() < 1 || !info[0].IsNumber()) {
      ThrowType(env, "setDecisionTimeout(ms): ms must be a number");
      return env.Undefined();
    }
    double ms = info[0].As<Napi::Number>().DoubleValue();
    if (!std::isfinite(ms) || ms < 0) {
      ThrowRange(env, "setDecisionTimeout(ms): ms must be a finite number >= 0");
      return env.Undefined();
    }
    engine_->SetDecisionTimeoutNs(static_cast<uint64_t>(ms * 1e6));
    return env.Undefined();
  }

  // JS thread. extendDeadline(handle, id: bigint, holdMs, session): 'ok' | 'late' | 'unknown'.
  Napi::Value JsExtendDeadline(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    if (!Usable(env)) return env.Undefined();
    uint32_t handle;
    if (!ParseUint32(env, info[0], "handle", &handle)) return env.Undefined();
    if (!info[1].IsBigInt()) {
      ThrowType(env, "extendDeadline: id must be a bigint");
      return env.Undefined();
    }
    bool lossless = false;
    const uint64_t id = info[1].As<Napi::BigInt>().Uint64Value(&lossless);
    if (!lossless) {
      ThrowRange(env, "extendDeadline: id must be an unsigned 64-bit bigint");
      return env.Undefined();
    }
    if (info.Length() < 3 || !info[2].IsNumber()) {
      ThrowType(env, "extendDeadline(handle, id, holdMs, session): holdMs must be a number");
      return env.Undefined();
    }
    const double ms = info[2].As<Napi::Number>().DoubleValue();
    if (!std::isfinite(ms) || ms < 0 || ms > 60000) {
      ThrowRange(env, "extendDeadline: holdMs must be 0 to 60000");
      return env.Undefined();
    }
    uint64_t session = 0;
    if (!ParseSession(env, info[3], "extendDeadline(handle, id, holdMs, session)", 1, &session)) return env.Undefined();
    const Engine::RespondStatus status = engine_->ExtendDeadline(handle, id, static_cast<uint64_t>(ms * 1e6), session);
    return Napi::String::New(env, status == Engine::RespondStatus::kOk ? "ok" : status == Engine::RespondStatus::kLate ? "late" : "unknown");
  }

  Napi::Value JsRespond(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    if (!Usable(env)) return env.Undefined();
    uint32_t handle;
    if (!ParseUint32(env, info[0], "handle", &handle)) return env.Undefined();
    uint64_t id = 0;
    if (info[1].IsBigInt()) {
      bool lossless = false;
      id = info[1].As<Napi::BigInt>().Uint64Value(&lossless);
      if (!lossless) {
        ThrowRange(env, "respond: id must be an unsigned 64-bit bigint");
        return env.Undefined();
      }
    } else if (info[1].IsNumber() && info[1].As<Napi::Number>().DoubleValue() >= 0) {
      id = static_cast<uint64_t>(info[1].As<Napi::Number>().DoubleValue());
    } else {
      ThrowType(env, "respond: id must be a bigint");
      return env.Undefined();
    }
    uint64_t session = 0;
    if (!ParseSession(env, info[3], "respond(handle, id, decision, session)", 0, &session)) return env.Undefined();
    uint64_t latency = 0;
    Engine::RespondStatus status;
    Engine::EmulatedDecision emulated;
    bool is_emulated = false;
    if (info[2].IsObject()) {
      Napi::Value kind = info[2].As<Napi::Object>().Get("kind");
      if (env.IsExceptionPending()) return env.Undefined();
      std::string k = kind.IsString() ? kind.As<Napi::String>().Utf8Value() : "";
      if (!ParseEmulated(env, info[2].As<Napi::Object>(), k, &is_emulated, &emulated) && is_emulated) return env.Undefined();
    }
    if (is_emulated) {
      std::string error;
      status = engine_->RespondEmulated(handle, id, emulated, session, &latency, &error);
      if (status == Engine::RespondStatus::kWrongSyscall) {
        ThrowRange(env, error);
        return env.Undefined();
      }
    } else {
      Answer answer;
      if (!ParseAnswer(env, info[2], true, &answer)) return env.Undefined();
      status = engine_->Respond(handle, id, answer, session, &latency);
    }
    Napi::Object result = Napi::Object::New(env);
    result.Set("status", status == Engine::RespondStatus::kOk         ? "ok"
                         : status == Engine::RespondStatus::kGone     ? "gone"
                         : status == Engine::RespondStatus::kAccepted ? "accepted"
                         : status == Engine::RespondStatus::kLate     ? "late"
                                                                      : "unknown");
    result.Set("latencyNs", Napi::BigInt::New(env, latency));
    return result;
  }

  // JS thread. [handle, 'killable' | 'interruptible'] for each container an emulation has seen.
  Napi::Value JsTargetWaits(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    if (!Usable(env)) return env.Undefined();
    const auto waits = engine_->TargetWaits();
    Napi::Array out = Napi::Array::New(env, waits.size());
    for (size_t i = 0; i < waits.size(); i++) {
      Napi::Array pair = Napi::Array::New(env, 2);
      pair.Set(0u, Napi::Number::New(env, waits[i].first));
      pair.Set(1u, Napi::String::New(env, waits[i].second == 'D' ? "killable" : "interruptible"));
      out.Set(static_cast<uint32_t>(i), pair);
    }
    return out;
  }

  Napi::Value JsStats(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    if (!Usable(env)) return env.Undefined();
    Ingest::DropCounts dropped = engine_->ingest() != nullptr ? engine_->ingest()->Dropped() : Ingest::DropCounts();
    return StatsObject(env, engine_->GetStats(), engine_->fd_store_enabled(), dropped);
  }

  // restore(fds: {fd, name}[], handoff: boolean, hold: boolean) -> what was restored (before start()).
  Napi::Value JsRestore(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    if (!Usable(env)) return env.Undefined();
    if (!info[0].IsArray() || !info[1].IsBoolean() || !info[2].IsBoolean()) {
      ThrowType(env, "restore(fds, handoff, hold): fds must be an array of {fd, name}, handoff and hold booleans");
      return env.Undefined();
    }
    Napi::Array list = info[0].As<Napi::Array>();
    std::vector<handoff::NamedFd> fds;
    for (uint32_t i = 0; i < list.Length(); i++) {
      Napi::Value item = list.Get(i);
      if (!item.IsObject()) {
        ThrowType(env, "restore: every entry must be an object {fd, name}");
        return env.Undefined();
      }
      Napi::Value fd = item.As<Napi::Object>().Get("fd");
      Napi::Value name = item.As<Napi::Object>().Get("name");
      uint32_t number;
      if (!ParseUint32(env, fd, "fd", &number)) return env.Undefined();
      if (!name.IsString()) {
        ThrowType(env, "restore: every entry needs a string name");
        return env.Undefined();
      }
      fds.push_back(handoff::NamedFd{static_cast<int>(number), name.As<Napi::String>().Utf8Value()});
    }
    Engine::RestoreResult r;
    engine_->Restore(fds, info[1].As<Napi::Boolean>().Value(), info[2].As<Napi::Boolean>().Value(), &r);
    // The containers wait for takeRestoredContainers(): a successor takes them after its ack, so
    // turning 1,000 of them into JS objects is not part of the pause.
    restored_ = std::move(r.containers);
    return RestoreObject(env, r, restored_.size());
  }

  // JS thread: what the last restore() took back, once (then an empty list).
  Napi::Value JsTakeRestoredContainers(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    if (!Usable(env)) return env.Undefined();
    Napi::Array containers = Napi::Array::New(env, restored_.size());
    for (size_t i = 0; i < restored_.size(); i++) {
      Napi::Object c = Napi::Object::New(env);
      std::string error;
      c.Set("handle", Napi::Number::New(env, restored_[i].handle));
      c.Set("record", Napi::String::New(env, engine_->RecordOf(restored_[i].handle, &error)));
      if (!error.empty()) c.Set("recordError", Napi::String::New(env, error));
      c.Set("policy", PolicyState(env, restored_[i].policy));
      containers.Set(static_cast<uint32_t>(i), c);
    }
    restored_.clear();
    return containers;
  }

  Napi::Value JsListenHandoff(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    if (!Usable(env)) return env.Undefined();
    uint32_t mode;
    if (!info[0].IsString() || !ParseUint32(env, info[1], "mode", &mode)) {
      if (!env.IsExceptionPending()) ThrowType(env, "listenHandoff(socketPath, mode): socketPath must be a string");
      return env.Undefined();
    }
    std::string error;
    if (!engine_->ListenHandoff(info[0].As<Napi::String>().Utf8Value(), mode & 07777, &error)) {
      Napi::Error::New(env, error).ThrowAsJavaScriptException();
    }
    return env.Undefined();
  }

  Napi::Value JsHoldForControlPlane(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    if (!Usable(env)) return env.Undefined();
    uint32_t ms;
    if (!ParseUint32(env, info[0], "ms", &ms)) return env.Undefined();
    engine_->HoldForControlPlane(ms);
    return env.Undefined();
  }

  Napi::Value JsSetDetailedEvents(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    if (!Usable(env)) return env.Undefined();
    if (!info[0].IsBoolean()) {
      ThrowType(env, "setDetailedEvents(detailed): a boolean");
      return env.Undefined();
    }
    engine_->SetDetailedEvents(info[0].As<Napi::Boolean>().Value());
    return env.Undefined();
  }

  Napi::Value JsSetAccepting(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    if (!Usable(env)) return env.Undefined();
    if (!info[0].IsBoolean()) {
      ThrowType(env, "setAccepting(accepting): a boolean");
      return env.Undefined();
    }
    engine_->SetAccepting(info[0].As<Napi::Boolean>().Value());
    return env.Undefined();
  }

  // handOff(conn, timeoutMs) -> {ok: true, summary, pausedMs} | {ok: false, error}. Blocks the JS thread
  // for the handoff (the engine thread answers nothing meanwhile anyway).
  Napi::Value JsHandOff(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    if (!Usable(env)) return env.Undefined();
    uint32_t conn, timeout_ms;
    if (!ParseUint32(env, info[0], "conn", &conn) || !ParseUint32(env, info[1], "timeoutMs", &timeout_ms)) {
      return env.Undefined();
    }
    std::string summary, error;
    uint64_t paused_ns = 0;
    bool ok = engine_->HandOff(static_cast<int>(conn), static_cast<int>(timeout_ms), &summary, &paused_ns, &error);
    Napi::Object o = Napi::Object::New(env);
    o.Set("ok", Napi::Boolean::New(env, ok));
    if (ok) {
      o.Set("summary", Napi::String::New(env, summary));
      o.Set("pausedMs", Napi::Number::New(env, static_cast<double>(paused_ns) / 1e6));
    } else {
      o.Set("error", Napi::String::New(env, error));
    }
    return o;
  }

  Napi::Value JsStop(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    if (engine_ != nullptr) engine_->Stop();
    return env.Undefined();
  }

  napi_env env_ = nullptr;
  bool hook_ = false;
  std::unique_ptr<Engine> engine_;
  std::vector<Engine::RestoreResult::Restored> restored_;  // JS thread: restore()'s, until taken
};

}  // namespace
}  // namespace seccomp_agent

void RegisterEngine(Napi::Env env, Napi::Object exports) {
  using namespace seccomp_agent;
  exports.Set("Engine", EngineWrap::Define(env));
}
