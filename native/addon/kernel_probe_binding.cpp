// probeKernel() for JS: what the running kernel offers (kernel_probe.hpp).
#include "kernel_probe_binding.hpp"

#include "kernel_probe.hpp"

namespace seccomp_agent {
namespace {

// JS thread, once at start: blocks for the probe child's few ms. -> {syncWakeUp, detail}.
Napi::Value ProbeKernel(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  KernelFeatures features = ProbeKernelFeatures();
  Napi::Object result = Napi::Object::New(env);
  result.Set("syncWakeUp", Napi::Boolean::New(env, features.sync_wake_up));
  result.Set("detail", Napi::String::New(env, features.detail));
  return result;
}

}  // namespace
}  // namespace seccomp_agent

void RegisterKernelProbe(Napi::Env env, Napi::Object exports) {
  exports.Set("probeKernel", Napi::Function::New(env, seccomp_agent::ProbeKernel, "probeKernel"));
}
