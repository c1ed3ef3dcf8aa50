#include "suffixed_path_binding.hpp"

#include "rule_arguments.hpp"

namespace seccomp_agent {
namespace {

// JS thread. (path: Uint8Array | null, truncated: boolean, suffix: Uint8Array) -> {path: Buffer}
// | {errno} | {invalid: reason}. `path` null: the caller's path was not read.
Napi::Value JsSuffixedPath(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 3 || !(info[0].IsNull() || info[0].IsTypedArray()) || !info[1].IsBoolean() || !info[2].IsTypedArray()) {
    Napi::TypeError::New(env, "suffixedPath(path: Uint8Array | null, truncated: boolean, suffix: Uint8Array)").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  Napi::Object result = Napi::Object::New(env);
  const Napi::Uint8Array suffix_bytes = info[2].As<Napi::Uint8Array>();
  const std::string suffix(reinterpret_cast<const char*>(suffix_bytes.Data()), suffix_bytes.ByteLength());
  if (!ValidSuffix(suffix)) {
    result.Set("invalid", "a mkdir suffix is a plain name part: 1 to 255 bytes, no '/', no NUL, not only dots");
    return result;
  }
  PathView view;
  const PathView* path = nullptr;
  if (!info[0].IsNull()) {
    const Napi::Uint8Array bytes = info[0].As<Napi::Uint8Array>();
    view = PathView{0, reinterpret_cast<const char*>(bytes.Data()), static_cast<uint32_t>(bytes.ByteLength()), info[1].As<Napi::Boolean>().Value()};
    path = &view;
  }
  std::string out;
  const int err = SuffixedPath(path, suffix, &out);
  if (err != 0) result.Set("errno", Napi::Number::New(env, err));
  else result.Set("path", Napi::Buffer<char>::Copy(env, out.data(), out.size()));
  return result;
}

}  // namespace
}  // namespace seccomp_agent

void RegisterSuffixedPath(Napi::Env env, Napi::Object exports) {
  exports.Set("suffixedPath", Napi::Function::New(env, seccomp_agent::JsSuffixedPath, "suffixedPath"));
}
