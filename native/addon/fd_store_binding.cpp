// The JS face of the file descriptor store (native/common/fd_store.h): notifications to
// $NOTIFY_SOCKET (systemd or seccomp-keeper), the fds passed back at start, and a watch on the
// process that holds the store. Everything here runs on the JS thread. The notifier is created on
// first use and kept per addon instance (not a global), so the addon can be loaded in several
// threads; it and the watches are freed by the env's cleanup hook.
#include "fd_store_binding.hpp"

#include <errno.h>
#include <math.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <uv.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "binding_args.hpp"
#include "fd_store.h"

namespace seccomp_agent {
namespace {

using fd_store::ListenedFd;
using fd_store::Notifier;

struct FdStoreState;

// One watched process: its pidfd polled in libuv's loop (the JS thread's epoll), so its exit is
// noticed the moment it happens, not at the next fd store call.
struct ProcessWatch {
  uv_poll_t poll;
  int pidfd = -1;
  uint32_t id = 0;
  Napi::FunctionReference callback;
  std::unique_ptr<Napi::AsyncContext> context;
  FdStoreState* state = nullptr;
};

struct FdStoreState {
  std::unique_ptr<Notifier> notifier;
  // The environment is read once: NOTIFY_SOCKET does not change under a running process.
  bool looked = false;
  // SECCOMP_KEEPER_PID as the addon was loaded (the data plane unsets it soon after, so it does not
  // reach its helpers): the notifier proves its store is this keeper before every send.
  long long keeper_pid = fd_store::Notifier::KeeperPidFromEnvironment();
  std::map<uint32_t, ProcessWatch*> watches;
  uint32_t next_watch = 1;
};

void OnWatchClosed(uv_handle_t* handle) { delete static_cast<ProcessWatch*>(handle->data); }

// JS thread. Out of the loop and forgotten; freed once libuv has let go of the handle. libuv
// takes the fd out of its epoll set inside uv_close, so closing the pidfd right after is safe.
void EndWatch(ProcessWatch* watch) {
  watch->state->watches.erase(watch->id);
  watch->callback.Reset();
  watch->context.reset();
  uv_poll_stop(&watch->poll);
  uv_close(reinterpret_cast<uv_handle_t*>(&watch->poll), OnWatchClosed);
  close(watch->pidfd);
  watch->pidfd = -1;
}

void CleanupState(void* arg) {
  auto* state = static_cast<FdStoreState*>(arg);
  while (!state->watches.empty()) EndWatch(state->watches.begin()->second);
  delete state;
}

// JS thread (libuv): the pidfd is readable, so the process has exited. One call, then the watch ends.
void OnProcessExit(uv_poll_t* handle, int status, int events) {
  (void)status;
  (void)events;
  auto* watch = static_cast<ProcessWatch*>(handle->data);
  Napi::Env env = watch->callback.Env();
  Napi::HandleScope scope(env);
  Napi::Function callback = watch->callback.Value();
  std::unique_ptr<Napi::AsyncContext> context = std::move(watch->context);
  EndWatch(watch);
  // MakeCallback: a callback from the loop, so microtasks and nextTicks run after it as usual.
  // onExit must not throw (dataplane/fd-store-watch.ts catches); if it does, the error is dropped
  // here rather than left pending outside any JS frame.
  callback.MakeCallback(env.Global(), {}, *context);
  if (env.IsExceptionPending()) env.GetAndClearPendingException();
}

// Null (no exception) when NOTIFY_SOCKET is unset; null with an exception pending when unusable.
Notifier* GetNotifier(const Napi::CallbackInfo& info) {
  FdStoreState* state = static_cast<FdStoreState*>(info.Data());
  if (!state->looked) {
    std::string error;
    state->notifier = Notifier::FromEnvironment(&error, state->keeper_pid);
    if (!error.empty()) {
      Napi::Error::New(info.Env(), error).ThrowAsJavaScriptException();
      return nullptr;  // not marked looked: a fixed environment may be tried again
    }
    state->looked = true;
  }
  return state->notifier.get();
}

bool GetString(const Napi::CallbackInfo& info, size_t index, const char* what, std::string* out) {
  if (info.Length() <= index || !info[index].IsString()) {
    ThrowType(info.Env(), std::string(what) + " must be a string");
    return false;
  }
  *out = info[index].As<Napi::String>().Utf8Value();
  return true;
}

// An optional (required when `required`) array of fds, each an integer 0..2^31-1.
bool GetFds(const Napi::CallbackInfo& info, size_t index, bool required, std::vector<int>* out) {
  Napi::Env env = info.Env();
  if (info.Length() <= index || info[index].IsUndefined()) {
    if (!required) return true;
    ThrowType(env, "fds must be an array of fd numbers");
    return false;
  }
  if (!info[index].IsArray()) {
    ThrowType(env, "fds must be an array of fd numbers");
    return false;
  }
  Napi::Array array = info[index].As<Napi::Array>();
  uint32_t length = array.Length();
  if (length > fd_store::kMaxFdsPerMessage) {
    Napi::RangeError::New(env, "at most " + std::to_string(fd_store::kMaxFdsPerMessage) + " fds fit in one notification")
        .ThrowAsJavaScriptException();
    return false;
  }
  for (uint32_t i = 0; i < length; i++) {
    Napi::Value v = array.Get(i);
    if (env.IsExceptionPending()) return false;
    double d = v.IsNumber() ? v.As<Napi::Number>().DoubleValue() : NAN;
    if (!(d >= 0 && d <= 2147483647.0) || d != floor(d)) {
      Napi::RangeError::New(env, "fds[" + std::to_string(i) + "] must be an fd number").ThrowAsJavaScriptException();
      return false;
    }
    out->push_back(int(d));
  }
  return true;
}

// sdNotify(message, fds?): false when NOTIFY_SOCKET is unset; throws when the send fails.
Napi::Value SdNotify(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  std::string message;
  std::vector<int> fds;
  if (!GetString(info, 0, "message", &message) || !GetFds(info, 1, false, &fds)) return env.Undefined();
  Notifier* notifier = GetNotifier(info);
  if (notifier == nullptr) return env.IsExceptionPending() ? env.Undefined() : Napi::Boolean::New(env, false);
  std::string error;
  if (!notifier->Send(message, fds.data(), fds.size(), &error)) {
    Napi::Error::New(env, error).ThrowAsJavaScriptException();
    return env.Undefined();
  }
  return Napi::Boolean::New(env, true);
}

// fdStoreStore(name, fds): FDSTORE=1 + FDNAME; false when NOTIFY_SOCKET is unset.
Napi::Value FdStoreStore(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  std::string name;
  std::vector<int> fds;
  if (!GetString(info, 0, "name", &name) || !GetFds(info, 1, true, &fds)) return env.Undefined();
  if (!fd_store::IsValidName(name)) {
    ThrowType(env, "fd store name \"" + name + "\" must be 1 to 255 characters of A-Z a-z 0-9 _ . -");
    return env.Undefined();
  }
  if (fds.empty()) {
    Napi::RangeError::New(env, "fdStoreStore needs at least one fd").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  Notifier* notifier = GetNotifier(info);
  if (notifier == nullptr) return env.IsExceptionPending() ? env.Undefined() : Napi::Boolean::New(env, false);
  std::string error;
  if (!notifier->Store(name, fds.data(), fds.size(), &error)) {
    Napi::Error::New(env, error).ThrowAsJavaScriptException();
    return env.Undefined();
  }
  return Napi::Boolean::New(env, true);
}

// fdStoreRemove(name): FDSTOREREMOVE=1 + FDNAME; false when NOTIFY_SOCKET is unset.
Napi::Value FdStoreRemove(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  std::string name;
  if (!GetString(info, 0, "name", &name)) return env.Undefined();
  if (!fd_store::IsValidName(name)) {
    ThrowType(env, "fd store name \"" + name + "\" must be 1 to 255 characters of A-Z a-z 0-9 _ . -");
    return env.Undefined();
  }
  Notifier* notifier = GetNotifier(info);
  if (notifier == nullptr) return env.IsExceptionPending() ? env.Undefined() : Napi::Boolean::New(env, false);
  std::string error;
  if (!notifier->Remove(name, &error)) {
    Napi::Error::New(env, error).ThrowAsJavaScriptException();
    return env.Undefined();
  }
  return Napi::Boolean::New(env, true);
}

// takeListenFds(): [{fd, name}] passed by systemd or the keeper (once: the variables are unset).
// Throws only when the variables are malformed and nothing could be taken; an fd that was not
// open is simply missing from the list.
Napi::Value TakeListenFds(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  std::string error;
  std::vector<ListenedFd> taken = fd_store::TakeListenFds(&error);
  if (!error.empty() && taken.empty()) {
    Napi::Error::New(env, error).ThrowAsJavaScriptException();
    return env.Undefined();
  }
  Napi::Array result = Napi::Array::New(env, taken.size());
  for (size_t i = 0; i < taken.size(); i++) {
    Napi::Object o = Napi::Object::New(env);
    o.Set("fd", Napi::Number::New(env, taken[i].fd));
    o.Set("name", Napi::String::New(env, taken[i].name));
    result.Set(uint32_t(i), o);
  }
  return result;
}

// watchProcessExit(pid, onExit): a watch id, or null when no process has that pid. onExit() runs
// once, on the JS thread, as soon as the process exits.
Napi::Value WatchProcessExit(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  FdStoreState* state = static_cast<FdStoreState*>(info.Data());
  double pid = info.Length() > 0 && info[0].IsNumber() ? info[0].As<Napi::Number>().DoubleValue() : NAN;
  if (!(pid >= 1 && pid <= 4194304) || pid != floor(pid)) {
    Napi::RangeError::New(env, "pid must be a process id").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  if (info.Length() < 2 || !info[1].IsFunction()) {
    ThrowType(env, "onExit must be a function");
    return env.Undefined();
  }
  int pidfd = int(syscall(SYS_pidfd_open, pid_t(pid), 0));
  if (pidfd < 0) {
    if (errno == ESRCH) return env.Null();
    Napi::Error::New(env, fd_store::ErrnoText("pidfd_open", errno)).ThrowAsJavaScriptException();
    return env.Undefined();
  }
  uv_loop_t* loop = nullptr;
  if (napi_get_uv_event_loop(env, &loop) != napi_ok || loop == nullptr) {
    close(pidfd);
    Napi::Error::New(env, "watchProcessExit: no event loop").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  auto* watch = new ProcessWatch();
  watch->pidfd = pidfd;
  watch->state = state;
  int rc = uv_poll_init(loop, &watch->poll, pidfd);
  if (rc != 0) {
    close(pidfd);
    delete watch;
    Napi::Error::New(env, std::string("uv_poll_init of a pidfd: ") + uv_strerror(rc)).ThrowAsJavaScriptException();
    return env.Undefined();
  }
  watch->poll.data = watch;
  watch->callback = Napi::Persistent(info[1].As<Napi::Function>());
  watch->context = std::make_unique<Napi::AsyncContext>(env, "seccomp-agent:process-watch");
  watch->id = state->next_watch++;
  if (state->next_watch == 0) state->next_watch = 1;
  state->watches[watch->id] = watch;
  rc = uv_poll_start(&watch->poll, UV_READABLE, OnProcessExit);
  if (rc != 0) {
    EndWatch(watch);
    Napi::Error::New(env, std::string("uv_poll_start of a pidfd: ") + uv_strerror(rc)).ThrowAsJavaScriptException();
    return env.Undefined();
  }
  // A watch must not keep the process alive by itself.
  uv_unref(reinterpret_cast<uv_handle_t*>(&watch->poll));
  return Napi::Number::New(env, watch->id);
}

// unwatchProcess(id): ends a watch (nothing when it already fired or ended).
Napi::Value UnwatchProcess(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  FdStoreState* state = static_cast<FdStoreState*>(info.Data());
  if (info.Length() < 1 || !info[0].IsNumber()) {
    ThrowType(env, "id must be a watch id");
    return env.Undefined();
  }
  auto it = state->watches.find(info[0].As<Napi::Number>().Uint32Value());
  if (it != state->watches.end()) EndWatch(it->second);
  return env.Undefined();
}

}  // namespace
}  // namespace seccomp_agent

void RegisterFdStore(Napi::Env env, Napi::Object exports) {
  using namespace seccomp_agent;
  auto* state = new FdStoreState();
  if (napi_add_env_cleanup_hook(env, CleanupState, state) != napi_ok) {
    Napi::Error::New(env, "fd store: napi_add_env_cleanup_hook failed").ThrowAsJavaScriptException();
    delete state;
    return;
  }
  exports.Set("sdNotify", Napi::Function::New(env, SdNotify, "sdNotify", state));
  exports.Set("fdStoreStore", Napi::Function::New(env, FdStoreStore, "fdStoreStore", state));
  exports.Set("fdStoreRemove", Napi::Function::New(env, FdStoreRemove, "fdStoreRemove", state));
  exports.Set("takeListenFds", Napi::Function::New(env, TakeListenFds, "takeListenFds", state));
  exports.Set("watchProcessExit", Napi::Function::New(env, WatchProcessExit, "watchProcessExit", state));
  exports.Set("unwatchProcess", Napi::Function::New(env, UnwatchProcess, "unwatchProcess", state));
}
