// The JS face of the file descriptor store (native/common/fd_store.h): notifications to
// $NOTIFY_SOCKET (systemd or seccomp-keeper) and the fds passed back at start. All four run on the
// JS thread. The notifier is created on first use and kept per addon instance (not a global), so
// the addon can be loaded in several threads; it is freed by the env's cleanup hook.
#include "fd_store_binding.hpp"

#include <math.h>

#include <memory>
#include <string>
#include <vector>

#include "fd_store.h"

namespace seccomp_agent {
namespace {

using fd_store::ListenedFd;
using fd_store::Notifier;

struct FdStoreState {
  std::unique_ptr<Notifier> notifier;
  // The environment is read once: NOTIFY_SOCKET does not change under a running process.
  bool looked = false;
};

void CleanupState(void* arg) { delete static_cast<FdStoreState*>(arg); }

void ThrowType(Napi::Env env, const std::string& message) { Napi::TypeError::New(env, message).ThrowAsJavaScriptException(); }

// Null (no exception) when NOTIFY_SOCKET is unset; null with an exception pending when unusable.
Notifier* GetNotifier(const Napi::CallbackInfo& info) {
  FdStoreState* state = static_cast<FdStoreState*>(info.Data());
  if (!state->looked) {
    std::string error;
    state->notifier = Notifier::FromEnvironment(&error);
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
}
