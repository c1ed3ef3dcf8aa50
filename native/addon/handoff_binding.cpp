#include "handoff_binding.hpp"

#include <unistd.h>

#include <string>
#include <vector>

#include "handoff.hpp"

namespace seccomp_agent {
namespace {

bool FdArgument(const Napi::CallbackInfo& info, size_t index, const char* what, int* fd) {
  if (!info[index].IsNumber() || info[index].As<Napi::Number>().Int32Value() < 0) {
    Napi::TypeError::New(info.Env(), std::string(what) + " must be an fd number").ThrowAsJavaScriptException();
    return false;
  }
  *fd = info[index].As<Napi::Number>().Int32Value();
  return true;
}

bool TimeoutArgument(const Napi::CallbackInfo& info, size_t index, int* ms) {
  if (!info[index].IsNumber() || info[index].As<Napi::Number>().Int32Value() < 1) {
    Napi::TypeError::New(info.Env(), "timeoutMs must be a positive number").ThrowAsJavaScriptException();
    return false;
  }
  *ms = info[index].As<Napi::Number>().Int32Value();
  return true;
}

// handoffConnect(path) -> fd | null (nobody serves it: start fresh). Throws on other failures.
Napi::Value Connect(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (!info[0].IsString()) {
    Napi::TypeError::New(env, "handoffConnect(path): path must be a string").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  std::string error;
  int fd = handoff::Connect(info[0].As<Napi::String>().Utf8Value(), &error);
  if (fd >= 0) return Napi::Number::New(env, fd);
  if (!error.empty()) Napi::Error::New(env, error).ThrowAsJavaScriptException();
  return env.Null();
}

// handoffReceive(conn, timeoutMs) -> {fds: {fd, name}[], summary}. Sends the hello first.
Napi::Value Receive(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  int conn, timeout_ms;
  if (!FdArgument(info, 0, "conn", &conn) || !TimeoutArgument(info, 1, &timeout_ms)) return env.Undefined();
  std::string error, summary;
  std::vector<handoff::NamedFd> fds;
  if (!handoff::SendHello(conn, &error) || !handoff::ReceiveEntries(conn, timeout_ms, &fds, &summary, &error)) {
    Napi::Error::New(env, error).ThrowAsJavaScriptException();
    return env.Undefined();
  }
  Napi::Array list = Napi::Array::New(env, fds.size());
  for (size_t i = 0; i < fds.size(); i++) {
    Napi::Object entry = Napi::Object::New(env);
    entry.Set("fd", Napi::Number::New(env, fds[i].fd));
    entry.Set("name", Napi::String::New(env, fds[i].name));
    list.Set(static_cast<uint32_t>(i), entry);
  }
  Napi::Object result = Napi::Object::New(env);
  result.Set("fds", list);
  result.Set("summary", Napi::String::New(env, summary));
  return result;
}

Napi::Value Ack(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  int conn;
  if (!FdArgument(info, 0, "conn", &conn)) return env.Undefined();
  std::string error;
  if (!handoff::SendAck(conn, &error)) Napi::Error::New(env, error).ThrowAsJavaScriptException();
  return env.Undefined();
}

// handoffWaitClosed(conn, timeoutMs) -> whether the old data plane let go in time (conn closed then).
Napi::Value WaitClosed(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  int conn, timeout_ms;
  if (!FdArgument(info, 0, "conn", &conn) || !TimeoutArgument(info, 1, &timeout_ms)) return env.Undefined();
  bool closed = handoff::WaitClosed(conn, timeout_ms);
  if (closed) close(conn);
  return Napi::Boolean::New(env, closed);
}

// closeFd(fd): for fds JS was handed and will not use (a failed handoff's connection).
Napi::Value CloseFd(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  int fd;
  if (!FdArgument(info, 0, "fd", &fd)) return env.Undefined();
  close(fd);
  return env.Undefined();
}

}  // namespace
}  // namespace seccomp_agent

void RegisterHandoff(Napi::Env env, Napi::Object exports) {
  exports.Set("handoffConnect", Napi::Function::New(env, seccomp_agent::Connect, "handoffConnect"));
  exports.Set("handoffReceive", Napi::Function::New(env, seccomp_agent::Receive, "handoffReceive"));
  exports.Set("handoffAck", Napi::Function::New(env, seccomp_agent::Ack, "handoffAck"));
  exports.Set("handoffWaitClosed", Napi::Function::New(env, seccomp_agent::WaitClosed, "handoffWaitClosed"));
  exports.Set("closeFd", Napi::Function::New(env, seccomp_agent::CloseFd, "closeFd"));
}
