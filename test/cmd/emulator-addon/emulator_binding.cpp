// The JS face of the emulated actions (native/addon/emulator.hpp, kill_freeze.hpp) for tests and the
// benchmark, in the test-only addon seccomp_emulator_addon.node (never shipped): class Emulator,
// whose methods return Promises settled on the JS thread (benchMkdir is the bench's loop), plus
// `emulatorTestSupport`, a few raw seccomp calls. The data plane never hands notify fds to JS:
// in production the engine calls the C++ Emulator directly with the fd it owns.
// Argument errors throw TypeError/RangeError; no C++ exception is involved.
#include "emulator_binding.hpp"

#include <dlfcn.h>
#include <errno.h>
#include <libgen.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "emulator.hpp"
#include "kill_freeze.hpp"
#include "monotonic_clock.h"
#include "seccomp_compat.h"
#include "target_memory.hpp"

namespace seccomp_agent {
namespace {

void ThrowType(Napi::Env env, const std::string& message) { Napi::TypeError::New(env, message).ThrowAsJavaScriptException(); }
void ThrowRange(Napi::Env env, const std::string& message) { Napi::RangeError::New(env, message).ThrowAsJavaScriptException(); }

// ---------------------------------------------------------------------------------------------
// Argument parsing (JS thread). Each returns false with a JS exception pending.

bool GetInt(Napi::Object o, const char* name, bool required, double min, double max, double* out) {
  Napi::Env env = o.Env();
  Napi::Value v = o.Get(name);
  if (env.IsExceptionPending()) return false;
  if (v.IsUndefined() && !required) return true;
  double d = v.IsNumber() ? v.As<Napi::Number>().DoubleValue() : NAN;
  if (!v.IsNumber()) {
    ThrowType(env, std::string(name) + " must be a number");
    return false;
  }
  if (!(d >= min && d <= max) || d != std::floor(d)) {
    ThrowRange(env, std::string(name) + " must be an integer from " + std::to_string((long long)min) + " to " +
                        std::to_string((long long)max));
    return false;
  }
  *out = d;
  return true;
}

bool GetU64(Napi::Object o, const char* name, bool required, uint64_t* out) {
  Napi::Env env = o.Env();
  Napi::Value v = o.Get(name);
  if (env.IsExceptionPending()) return false;
  if (v.IsUndefined() && !required) return true;
  if (v.IsBigInt()) {
    bool lossless = false;
    *out = v.As<Napi::BigInt>().Uint64Value(&lossless);
    if (lossless) return true;
  } else if (v.IsNumber()) {
    double d = v.As<Napi::Number>().DoubleValue();
    if (d >= 0 && d <= 9007199254740991.0 && d == std::floor(d)) {
      *out = uint64_t(d);
      return true;
    }
  }
  ThrowRange(env, std::string(name) + " must be an unsigned 64-bit bigint");
  return false;
}

bool GetString(Napi::Object o, const char* name, bool required, std::string* out) {
  Napi::Env env = o.Env();
  Napi::Value v = o.Get(name);
  if (env.IsExceptionPending()) return false;
  if (v.IsUndefined() && !required) return true;
  if (!v.IsString()) {
    ThrowType(env, std::string(name) + " must be a string");
    return false;
  }
  *out = v.As<Napi::String>().Utf8Value();
  if (out->find('\0') != std::string::npos) {
    ThrowType(env, std::string(name) + " must not contain NUL");
    return false;
  }
  return true;
}

bool GetBool(Napi::Object o, const char* name, bool* out) {
  Napi::Env env = o.Env();
  Napi::Value v = o.Get(name);
  if (env.IsExceptionPending()) return false;
  if (v.IsUndefined()) return true;
  if (!v.IsBoolean()) {
    ThrowType(env, std::string(name) + " must be a boolean");
    return false;
  }
  *out = v.As<Napi::Boolean>().Value();
  return true;
}

bool GetObject(const Napi::CallbackInfo& info, const char* method, Napi::Object* out) {
  if (info.Length() < 1 || !info[0].IsObject()) {
    ThrowType(info.Env(), std::string(method) + " needs an options object");
    return false;
  }
  *out = info[0].As<Napi::Object>();
  return true;
}

// {notifyFd, id, pid, owner?}
bool GetRef(Napi::Object o, NotificationRef* ref) {
  double fd = -1, pid = 0, owner = 0;
  if (!GetInt(o, "notifyFd", true, 0, 2147483647, &fd) || !GetU64(o, "id", true, &ref->id) ||
      !GetInt(o, "pid", true, 1, 2147483647, &pid) || !GetInt(o, "owner", false, 0, 4294967295.0, &owner)) {
    return false;
  }
  ref->notify_fd = int(fd);
  ref->pid = pid_t(pid);
  ref->owner = uint64_t(owner);
  return true;
}

Napi::Object ResultToJs(Napi::Env env, const ActionResult& r) {
  Napi::Object o = Napi::Object::New(env);
  o.Set("outcome", OutcomeName(r.outcome));
  o.Set("errno", Napi::Number::New(env, r.err));
  o.Set("cause", Napi::Number::New(env, r.cause));
  o.Set("answered", Napi::Boolean::New(env, r.answered));
  o.Set("sendErrno", Napi::Number::New(env, r.send_err));
  o.Set("stage", r.stage ? r.stage : "");
  o.Set("detail", r.detail);
  o.Set("latencyNs", Napi::BigInt::New(env, r.latency_ns));
  o.Set("helperNs", Napi::BigInt::New(env, r.helper_ns));
  return o;
}

// build/Release/seccomp-nshelper, beside the .node file this code is in.
std::string DefaultHelperPath() {
  Dl_info info;
  if (dladdr(reinterpret_cast<void*>(&DefaultHelperPath), &info) == 0 || !info.dli_fname) return "seccomp-nshelper";
  std::string so = info.dli_fname;
  size_t slash = so.rfind('/');
  return (slash == std::string::npos ? std::string(".") : so.substr(0, slash)) + "/seccomp-nshelper";
}

// A whole path from the target (target_memory.hpp, the engine's reader): false when unreadable or
// longer than PATH_MAX. Callers re-check NOTIF_ID_VALID before trusting it.
bool ReadTargetPath(pid_t pid, uint64_t addr, std::string* out) {
  char buf[kTargetPathMax];
  TargetString read;
  out->clear();
  if (!ReadTargetString(pid, addr, buf, &read) || read.truncated) return false;
  out->assign(buf, read.length);
  return true;
}

// ---------------------------------------------------------------------------------------------
// Work done on a libuv pool thread, settling a Promise.

class PromiseWorker : public Napi::AsyncWorker {
 public:
  using Work = std::function<void(PromiseWorker*)>;
  using Settle = std::function<Napi::Value(Napi::Env)>;
  PromiseWorker(Napi::Env env, Work work) : Napi::AsyncWorker(env, "seccomp-emulator"), deferred_(Napi::Promise::Deferred::New(env)), work_(std::move(work)) {}
  Napi::Promise Promise() { return deferred_.Promise(); }
  // Set from Execute (pool thread): how to build the resolution value on the JS thread.
  Settle settle;
  // Keeps an object (the Emulator whose C++ side Execute uses) from being collected meanwhile.
  Napi::ObjectReference keep_alive;
  void Fail(const std::string& message) { SetError(message); }

 protected:
  void Execute() override { work_(this); }
  void OnOK() override { deferred_.Resolve(settle ? settle(Env()) : Env().Undefined()); }
  void OnError(const Napi::Error& e) override { deferred_.Reject(e.Value()); }

 private:
  Napi::Promise::Deferred deferred_;
  Work work_;
};

Napi::Value RunAction(Napi::Env env, std::function<ActionResult()> fn) {
  auto* w = new PromiseWorker(env, [fn](PromiseWorker* self) {
    ActionResult r = fn();
    self->settle = [r](Napi::Env e) -> Napi::Value { return ResultToJs(e, r); };
  });
  Napi::Promise p = w->Promise();
  w->Queue();
  return p;
}

// ---------------------------------------------------------------------------------------------
// class Emulator

struct Completion {
  Napi::Promise::Deferred deferred;
  ActionResult result;
};

// The TSFN's context: outlives the EmulatorWrap (a GC finalizer may run while completions are
// still queued) and is freed by the TSFN's own finalizer. JS thread only.
struct TsfnState;
void DeliverCompletion(Napi::Env env, Napi::Function, TsfnState* state, Completion* c);
using CompletionTsfn = Napi::TypedThreadSafeFunction<TsfnState, Completion, DeliverCompletion>;
struct TsfnState {
  CompletionTsfn tsfn;
  size_t pending = 0;  // promises not yet settled; the TSFN keeps the loop alive while > 0
  bool released = false;
};

class EmulatorWrap : public Napi::ObjectWrap<EmulatorWrap> {
 public:
  static Napi::Function Define(Napi::Env env) {
    return DefineClass(env, "Emulator",
                       {
                           InstanceMethod<&EmulatorWrap::JsMkdir>("mkdir"),
                           InstanceMethod<&EmulatorWrap::JsMount>("mount"),
                           InstanceMethod<&EmulatorWrap::JsKill>("kill"),
                           InstanceMethod<&EmulatorWrap::JsFreeze>("freeze"),
                           InstanceMethod<&EmulatorWrap::JsThaw>("thaw"),
                           InstanceMethod<&EmulatorWrap::JsForget>("forget"),
                           InstanceMethod<&EmulatorWrap::JsStats>("stats"),
                           InstanceMethod<&EmulatorWrap::JsBenchMkdir>("benchMkdir"),
                           InstanceMethod<&EmulatorWrap::JsClose>("close"),
                       });
  }

  // JS thread: new Emulator({helperPath?, spawnPerCall?, maxHelpers?, requestTimeoutMs?,
  // idleTimeoutMs?, busyPollUs?, failureErrno?}).
  explicit EmulatorWrap(const Napi::CallbackInfo& info) : Napi::ObjectWrap<EmulatorWrap>(info) {
    Napi::Env env = info.Env();
    env_ = env;
    EmulatorOptions o;
    o.helper_path = DefaultHelperPath();
    if (info.Length() > 0 && !info[0].IsUndefined()) {
      if (!info[0].IsObject()) {
        ThrowType(env, "Emulator options must be an object");
        return;
      }
      Napi::Object opts = info[0].As<Napi::Object>();
      double max = double(o.max_helpers), req = o.request_timeout_ms, idle = o.idle_timeout_ms, fail = o.failure_errno;
      double busy = o.busy_poll_us;
      if (!GetString(opts, "helperPath", false, &o.helper_path) || !GetBool(opts, "spawnPerCall", &o.spawn_per_call) ||
          !GetInt(opts, "maxHelpers", false, 1, 4096, &max) || !GetInt(opts, "requestTimeoutMs", false, 1, 3600000, &req) ||
          !GetInt(opts, "idleTimeoutMs", false, 1, 86400000, &idle) || !GetInt(opts, "failureErrno", false, 1, 4095, &fail) ||
          !GetInt(opts, "busyPollUs", false, 0, 1000000, &busy)) {
        return;
      }
      o.max_helpers = size_t(max);
      o.request_timeout_ms = uint32_t(req);
      o.idle_timeout_ms = uint32_t(idle);
      o.busy_poll_us = uint32_t(busy);
      o.failure_errno = int(fail);
    }
    std::string error;
    emulator_ = Emulator::Create(o, &error);
    if (!emulator_) {
      Napi::Error::New(env, "cannot start the emulator: " + error).ThrowAsJavaScriptException();
      return;
    }
    state_ = new TsfnState;
    state_->tsfn = CompletionTsfn::New(env, "seccomp-emulator", 0, 1, state_,
                                       [](Napi::Env, void*, TsfnState* state) { delete state; });
    state_->tsfn.Unref(env);
    if (napi_add_env_cleanup_hook(env, &EmulatorWrap::CleanupHook, this) == napi_ok) hook_ = true;
  }

  // JS thread (GC finalizer).
  ~EmulatorWrap() override {
    if (hook_) napi_remove_env_cleanup_hook(env_, &EmulatorWrap::CleanupHook, this);
    Shutdown();
  }

 private:
  static void CleanupHook(void* arg) {
    EmulatorWrap* self = static_cast<EmulatorWrap*>(arg);
    self->hook_ = false;
    self->Shutdown();
  }

  // JS thread. Stops the helpers; completions still queued are delivered, then the TSFN goes.
  void Shutdown() {
    if (emulator_) emulator_->Stop();
    if (state_) {
      state_->released = true;
      state_->tsfn.Release();  // queued completions are still delivered, then the state is freed
      state_ = nullptr;
    }
  }

  bool Usable(Napi::Env env) {
    if (!emulator_ || !state_) {
      Napi::Error::New(env, "the emulator is closed").ThrowAsJavaScriptException();
      return false;
    }
    return true;
  }

  // JS thread: a Promise settled when `done` fires on the emulator thread.
  ActionDone Track(Napi::Env env, Napi::Promise* promise) {
    Completion* c = new Completion{Napi::Promise::Deferred::New(env), {}};
    *promise = c->deferred.Promise();
    if (state_->pending++ == 0) state_->tsfn.Ref(env);
    CompletionTsfn tsfn = state_->tsfn;
    return [tsfn, c](const ActionResult& r) mutable {
      c->result = r;
      if (tsfn.NonBlockingCall(c) != napi_ok) delete c;  // environment going away
    };
  }

  Napi::Value JsMkdir(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    Napi::Object o;
    NotificationRef ref;
    MkdirArgs args;
    double dirfd = AT_FDCWD, mode = 0777;
    bool respond = true;
    if (!Usable(env) || !GetObject(info, "mkdir", &o) || !GetRef(o, &ref) || !GetString(o, "path", true, &args.path) ||
        !GetInt(o, "dirfd", false, -100, 2147483647, &dirfd) || !GetInt(o, "mode", false, 0, 07777, &mode) ||
        !GetBool(o, "respond", &respond) || !GetBool(o, "replyMayWait", &ref.reply_may_wait)) {
      return env.Undefined();
    }
    args.dirfd = int(dirfd);
    args.mode = uint32_t(mode);
    Napi::Promise promise = Napi::Promise::Deferred::New(env).Promise();
    emulator_->Mkdir(ref, args, respond, Track(env, &promise));
    return promise;
  }

  Napi::Value JsMount(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    Napi::Object o;
    NotificationRef ref;
    MountArgs args;
    uint64_t flags = 0;
    bool respond = true;
    if (!Usable(env) || !GetObject(info, "mount", &o) || !GetRef(o, &ref) || !GetString(o, "source", false, &args.source) ||
        !GetString(o, "target", true, &args.target) || !GetString(o, "fstype", true, &args.fstype) ||
        !GetString(o, "data", false, &args.data) || !GetU64(o, "flags", false, &flags) ||
        !GetBool(o, "requireCapSysAdmin", &args.require_cap_sys_admin) || !GetBool(o, "respond", &respond)) {
      return env.Undefined();
    }
    args.flags = flags;
    Napi::Promise promise = Napi::Promise::Deferred::New(env).Promise();
    emulator_->Mount(ref, args, respond, Track(env, &promise));
    return promise;
  }

  Napi::Value JsKill(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    Napi::Object o;
    NotificationRef ref;
    double init = 0, sig = SIGKILL, answer = 0;
    if (!Usable(env) || !GetObject(info, "kill", &o) || !GetRef(o, &ref) || !GetInt(o, "initPid", false, 0, 2147483647, &init) ||
        !GetInt(o, "signal", false, 1, 64, &sig) || !GetInt(o, "answerErrno", false, 0, 4095, &answer)) {
      return env.Undefined();
    }
    KillArgs args;
    args.init_pid = pid_t(init);
    args.signal = int(sig);
    int answer_errno = int(answer);
    return RunAction(env, [ref, args, answer_errno] { return KillContainer(ref, args, answer_errno); });
  }

  Napi::Value JsFreeze(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    Napi::Object o;
    NotificationRef ref;
    double answer = 0;
    if (!Usable(env) || !GetObject(info, "freeze", &o) || !GetRef(o, &ref) || !GetInt(o, "answerErrno", false, 0, 4095, &answer)) {
      return env.Undefined();
    }
    int answer_errno = int(answer);
    return RunAction(env, [ref, answer_errno] { return FreezeContainer(ref, answer_errno); });
  }

  Napi::Value JsThaw(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    if (!Usable(env)) return env.Undefined();
    if (info.Length() < 1 || !info[0].IsNumber() || info[0].As<Napi::Number>().Int32Value() <= 0) {
      ThrowType(env, "thaw(pid): pid must be a positive number");
      return env.Undefined();
    }
    pid_t pid = info[0].As<Napi::Number>().Int32Value();
    return RunAction(env, [pid] { return ThawContainer(pid); });
  }

  Napi::Value JsForget(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    if (!Usable(env)) return env.Undefined();
    if (info.Length() < 1 || !info[0].IsNumber()) {
      ThrowType(env, "forget(owner): owner must be a number");
      return env.Undefined();
    }
    emulator_->Forget(uint64_t(info[0].As<Napi::Number>().Int64Value()));
    return env.Undefined();
  }

  Napi::Value JsStats(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    if (!Usable(env)) return env.Undefined();
    EmulatorStats s = emulator_->Stats();
    Napi::Object o = Napi::Object::New(env);
    o.Set("helpers", double(s.helpers));
    o.Set("spawned", double(s.spawned));
    o.Set("died", double(s.died));
    o.Set("timedOut", double(s.timed_out));
    o.Set("inFlight", double(s.in_flight));
    o.Set("direct", double(s.direct));
    o.Set("doorbells", double(s.doorbells));
    return o;
  }

  // JS thread: benchMkdir({notifyFd, count, timeoutMs?, owner?}): answers up to `count` mkdir or
  // mkdirat notifications of `notifyFd` through the emulator (respond=true), as the engine would,
  // on a libuv pool thread; anything else gets CONTINUE. Resolves with round-trip figures from
  // NOTIF_RECV's return to the emulator's result. For `npm run bench` and the tests.
  Napi::Value JsBenchMkdir(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    Napi::Object o;
    double fd = -1, count = 0, timeout = 5000, owner = 0;
    if (!Usable(env) || !GetObject(info, "benchMkdir", &o) || !GetInt(o, "notifyFd", true, 0, 2147483647, &fd) ||
        !GetInt(o, "count", true, 1, 1e9, &count) || !GetInt(o, "timeoutMs", false, 1, 3600000, &timeout) ||
        !GetInt(o, "owner", false, 0, 4294967295.0, &owner)) {
      return env.Undefined();
    }
    Emulator* emu = emulator_.get();
    auto* w = new PromiseWorker(env, [emu, fd, count, timeout, owner](PromiseWorker* self) {
      std::vector<double> total, helper;
      uint64_t failures = 0, other = 0;
      while (total.size() < size_t(count)) {
        pollfd p = {int(fd), POLLIN, 0};
        int rc = poll(&p, 1, int(timeout));
        if (rc <= 0 || (p.revents & (POLLHUP | POLLERR | POLLNVAL)) != 0) break;
        seccomp_notif n;
        memset(&n, 0, sizeof(n));
        if (ioctl(int(fd), SECCOMP_IOCTL_NOTIF_RECV, &n) != 0) {
          if (errno == EINTR || errno == ENOENT) continue;
          break;
        }
        uint64_t start = MonotonicNs();
        bool is_mkdir = n.data.nr == SYS_mkdir, is_mkdirat = n.data.nr == SYS_mkdirat;
        std::string path;
        uint64_t id = n.id;
        if ((!is_mkdir && !is_mkdirat) || !ReadTargetPath(pid_t(n.pid), n.data.args[is_mkdir ? 0 : 1], &path) ||
            ioctl(int(fd), SECCOMP_IOCTL_NOTIF_ID_VALID, &id) != 0) {
          seccomp_notif_resp r = {};
          r.id = n.id;
          r.flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE;
          ioctl(int(fd), SECCOMP_IOCTL_NOTIF_SEND, &r);
          other++;
          continue;
        }
        NotificationRef ref{int(fd), n.id, pid_t(n.pid), uint64_t(owner)};
        MkdirArgs args;
        args.path = path;
        args.dirfd = is_mkdir ? AT_FDCWD : int(n.data.args[0]);
        args.mode = uint32_t(n.data.args[is_mkdir ? 1 : 2]);
        std::promise<ActionResult> done;
        std::future<ActionResult> result = done.get_future();
        emu->Mkdir(ref, args, true, [&done](const ActionResult& r) { done.set_value(r); });
        ActionResult r = result.get();
        if (!r.answered) failures++;
        total.push_back(double(MonotonicNs() - start) / 1e3);
        helper.push_back(double(r.helper_ns) / 1e3);
      }
      std::sort(total.begin(), total.end());
      std::sort(helper.begin(), helper.end());
      auto pct = [](const std::vector<double>& v, double q) { return v.empty() ? 0.0 : v[std::min(v.size() - 1, size_t(q * v.size()))]; };
      double p50 = pct(total, 0.5), p99 = pct(total, 0.99), max = total.empty() ? 0 : total.back();
      double h50 = pct(helper, 0.5), h99 = pct(helper, 0.99);
      double n = double(total.size());
      self->settle = [=](Napi::Env e) -> Napi::Value {
        Napi::Object out = Napi::Object::New(e);
        out.Set("n", n);
        out.Set("p50Us", p50);
        out.Set("p99Us", p99);
        out.Set("maxUs", max);
        out.Set("helperP50Us", h50);
        out.Set("helperP99Us", h99);
        out.Set("unanswered", double(failures));
        out.Set("continued", double(other));
        return out;
      };
    });
    w->keep_alive = Napi::Persistent(Value());
    Napi::Promise p = w->Promise();
    w->Queue();
    return p;
  }

  Napi::Value JsClose(const Napi::CallbackInfo& info) {
    Shutdown();
    return info.Env().Undefined();
  }

  napi_env env_ = nullptr;
  bool hook_ = false;
  std::unique_ptr<Emulator> emulator_;
  TsfnState* state_ = nullptr;  // null once released
};

void DeliverCompletion(Napi::Env env, Napi::Function, TsfnState* state, Completion* c) {
  std::unique_ptr<Completion> owned(c);
  if (env == nullptr) return;  // environment torn down: nobody is waiting
  c->deferred.Resolve(ResultToJs(env, c->result));
  if (--state->pending == 0 && !state->released) state->tsfn.Unref(env);
}

// ---------------------------------------------------------------------------------------------
// emulatorTestSupport: raw seccomp calls for tests only. JS holds notify fd numbers here.

// receiveNotifyFd(socketPath, timeoutMs) -> Promise<{fds: number[], json: string}>: listens on
// socketPath, accepts one runtime connection (runc's listenerPath protocol), keeps its fds.
Napi::Value TestReceiveNotifyFd(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 2 || !info[0].IsString() || !info[1].IsNumber()) {
    ThrowType(env, "receiveNotifyFd(socketPath, timeoutMs)");
    return env.Undefined();
  }
  std::string path = info[0].As<Napi::String>().Utf8Value();
  int timeout = info[1].As<Napi::Number>().Int32Value();
  sockaddr_un addr = {};
  if (path.size() >= sizeof(addr.sun_path)) {
    ThrowRange(env, "socketPath is too long");
    return env.Undefined();
  }
  auto* w = new PromiseWorker(env, [path, timeout](PromiseWorker* self) {
    sockaddr_un addr = {};
    addr.sun_family = AF_UNIX;
    memcpy(addr.sun_path, path.c_str(), path.size());
    int ls = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    unlink(path.c_str());
    if (ls < 0 || bind(ls, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 || listen(ls, 1) != 0) {
      self->Fail(std::string("listen on ") + path + ": " + strerror(errno));
      if (ls >= 0) close(ls);
      return;
    }
    std::vector<int> fds;
    std::string json;
    std::string error;
    pollfd p = {ls, POLLIN, 0};
    int conn = poll(&p, 1, timeout) == 1 ? accept4(ls, nullptr, nullptr, SOCK_CLOEXEC) : -1;
    close(ls);
    unlink(path.c_str());
    if (conn < 0) {
      self->Fail("no runtime connected to " + path + " in time");
      return;
    }
    uint64_t deadline = MonotonicNs() + uint64_t(timeout) * 1000000ull;
    for (;;) {
      char buf[4096];
      alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * 8)];
      iovec iov = {buf, sizeof(buf)};
      msghdr msg = {};
      msg.msg_iov = &iov;
      msg.msg_iovlen = 1;
      msg.msg_control = control;
      msg.msg_controllen = sizeof(control);
      pollfd cp = {conn, POLLIN, 0};
      int left = int((deadline - std::min(deadline, MonotonicNs())) / 1000000ull);
      if (poll(&cp, 1, left) != 1) {
        error = "the runtime did not close its connection in time";
        break;
      }
      ssize_t n = recvmsg(conn, &msg, MSG_CMSG_CLOEXEC);
      if (n < 0) {
        error = std::string("recvmsg: ") + strerror(errno);
        break;
      }
      for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
        for (size_t i = 0; i < (c->cmsg_len - CMSG_LEN(0)) / sizeof(int); ++i) {
          int fd;
          memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
          fds.push_back(fd);
        }
      }
      if (n == 0) break;
      json.append(buf, size_t(n));
    }
    close(conn);
    if (!error.empty()) {
      for (int fd : fds) close(fd);
      self->Fail(error);
      return;
    }
    self->settle = [fds, json](Napi::Env e) -> Napi::Value {
      Napi::Object out = Napi::Object::New(e);
      Napi::Array arr = Napi::Array::New(e, fds.size());
      for (size_t i = 0; i < fds.size(); ++i) arr.Set(uint32_t(i), Napi::Number::New(e, fds[i]));
      out.Set("fds", arr);
      out.Set("json", json);
      return out;
    };
  });
  Napi::Promise p = w->Promise();
  w->Queue();
  return p;
}

// recvNotification(fd, timeoutMs) -> Promise<{id, pid, nr, args, strings} | null>: one
// NOTIF_RECV; path-like arguments of mkdir, mkdirat and mount (and mount's data) are read and
// re-validated.
Napi::Value TestRecvNotification(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 2 || !info[0].IsNumber() || !info[1].IsNumber()) {
    ThrowType(env, "recvNotification(fd, timeoutMs)");
    return env.Undefined();
  }
  int fd = info[0].As<Napi::Number>().Int32Value();
  int timeout = info[1].As<Napi::Number>().Int32Value();
  auto* w = new PromiseWorker(env, [fd, timeout](PromiseWorker* self) {
    pollfd p = {fd, POLLIN, 0};
    int rc = poll(&p, 1, timeout);
    if (rc == 0 || (rc == 1 && !(p.revents & POLLIN))) {
      self->settle = [](Napi::Env e) -> Napi::Value { return e.Null(); };
      return;
    }
    seccomp_notif n;
    memset(&n, 0, sizeof(n));
    if (rc < 0 || ioctl(fd, SECCOMP_IOCTL_NOTIF_RECV, &n) != 0) {
      self->Fail(std::string("NOTIF_RECV: ") + strerror(errno));
      return;
    }
    std::vector<int> indexes;
    if (n.data.nr == SYS_mkdir) indexes = {0};
    if (n.data.nr == SYS_mkdirat) indexes = {1};
    if (n.data.nr == SYS_mount) indexes = {0, 1, 2, 4};
    std::vector<std::string> strings(6);
    for (int i : indexes) {
      if (n.data.args[i]) ReadTargetPath(pid_t(n.pid), n.data.args[i], &strings[size_t(i)]);
    }
    uint64_t id = n.id;
    bool valid = ioctl(fd, SECCOMP_IOCTL_NOTIF_ID_VALID, &id) == 0;
    self->settle = [n, strings, valid](Napi::Env e) -> Napi::Value {
      Napi::Object out = Napi::Object::New(e);
      out.Set("id", Napi::BigInt::New(e, uint64_t(n.id)));
      out.Set("pid", Napi::Number::New(e, n.pid));
      out.Set("nr", Napi::Number::New(e, n.data.nr));
      Napi::Array args = Napi::Array::New(e, 6);
      Napi::Array strs = Napi::Array::New(e, 6);
      for (uint32_t i = 0; i < 6; ++i) {
        args.Set(i, Napi::BigInt::New(e, uint64_t(n.data.args[i])));
        strs.Set(i, Napi::String::New(e, strings[i]));
      }
      out.Set("args", args);
      out.Set("strings", strs);
      out.Set("valid", Napi::Boolean::New(e, valid));
      return out;
    };
  });
  Napi::Promise p = w->Promise();
  w->Queue();
  return p;
}

// answer(fd, id, errno) -> 0 or the errno of NOTIF_SEND. errno -1: CONTINUE; 0: success (0).
Napi::Value TestAnswer(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 3 || !info[0].IsNumber() || !info[1].IsBigInt() || !info[2].IsNumber()) {
    ThrowType(env, "answer(fd, id: bigint, errno)");
    return env.Undefined();
  }
  bool lossless = false;
  seccomp_notif_resp r = {};
  r.id = info[1].As<Napi::BigInt>().Uint64Value(&lossless);
  int err = info[2].As<Napi::Number>().Int32Value();
  if (err < 0) {
    r.flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE;
  } else {
    r.error = -err;
  }
  int rc = ioctl(info[0].As<Napi::Number>().Int32Value(), SECCOMP_IOCTL_NOTIF_SEND, &r);
  return Napi::Number::New(env, rc == 0 ? 0 : errno);
}

Napi::Value TestCloseFd(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 1 || !info[0].IsNumber()) {
    ThrowType(env, "closeFd(fd)");
    return env.Undefined();
  }
  return Napi::Number::New(env, close(info[0].As<Napi::Number>().Int32Value()) == 0 ? 0 : errno);
}

}  // namespace
}  // namespace seccomp_agent

void RegisterEmulator(Napi::Env env, Napi::Object exports) {
  using namespace seccomp_agent;
  exports.Set("Emulator", EmulatorWrap::Define(env));
  Napi::Object test = Napi::Object::New(env);
  test.Set("receiveNotifyFd", Napi::Function::New(env, TestReceiveNotifyFd, "receiveNotifyFd"));
  test.Set("recvNotification", Napi::Function::New(env, TestRecvNotification, "recvNotification"));
  test.Set("answer", Napi::Function::New(env, TestAnswer, "answer"));
  test.Set("closeFd", Napi::Function::New(env, TestCloseFd, "closeFd"));
  exports.Set("emulatorTestSupport", test);
}
