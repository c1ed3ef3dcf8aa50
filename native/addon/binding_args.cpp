// JS arguments to the engine's types, and a policy in force back to JS (binding_args.hpp).
#include "binding_args.hpp"

#include <cmath>
#include <string>

namespace seccomp_agent {

void ThrowType(Napi::Env env, const std::string& message) {
  Napi::TypeError::New(env, message).ThrowAsJavaScriptException();
}
void ThrowRange(Napi::Env env, const std::string& message) {
  Napi::RangeError::New(env, message).ThrowAsJavaScriptException();
}

// Reads an optional non-negative number property; false (exception pending) when malformed.
bool OptionalNumber(Napi::Object obj, const char* name, double min, double* out) {
  Napi::Env env = obj.Env();
  Napi::Value v = obj.Get(name);
  if (env.IsExceptionPending()) return false;
  if (v.IsUndefined()) return true;
  if (!v.IsNumber() || !std::isfinite(v.As<Napi::Number>().DoubleValue()) || v.As<Napi::Number>().DoubleValue() < min) {
    ThrowRange(env, std::string("option ") + name + " must be a finite number >= " + std::to_string(static_cast<long long>(min)));
    return false;
  }
  *out = v.As<Napi::Number>().DoubleValue();
  return true;
}

bool ParseErrno(Napi::Env env, Napi::Value v, int32_t* out) {
  if (!v.IsNumber()) {
    ThrowType(env, "errno must be a number");
    return false;
  }
  double d = v.As<Napi::Number>().DoubleValue();
  if (!(d >= 1 && d <= 4095) || d != std::floor(d)) {
    ThrowRange(env, "errno must be an integer from 1 to 4095, got " + v.ToString().Utf8Value());
    return false;
  }
  *out = static_cast<int32_t>(d);
  return true;
}

// {kind:'continue'} | {kind:'error', errno} | (allow_value) {kind:'value', value: bigint}
bool ParseAnswer(Napi::Env env, Napi::Value v, bool allow_value, Answer* out) {
  if (!v.IsObject()) {
    ThrowType(env, allow_value ? "decision must be an object" : "defaultAction must be an object");
    return false;
  }
  Napi::Object obj = v.As<Napi::Object>();
  Napi::Value kind = obj.Get("kind");
  if (env.IsExceptionPending()) return false;
  std::string k = kind.IsString() ? kind.As<Napi::String>().Utf8Value() : "";
  if (k == "continue") {
    out->kind = Answer::kContinue;
    return true;
  }
  if (k == "error") {
    out->kind = Answer::kError;
    Napi::Value e = obj.Get("errno");
    if (env.IsExceptionPending()) return false;
    return ParseErrno(env, e, &out->error);
  }
  if (k == "value" && allow_value) {
    out->kind = Answer::kValue;
    Napi::Value val = obj.Get("value");
    if (env.IsExceptionPending()) return false;
    if (val.IsBigInt()) {
      bool lossless = false;
      int64_t s = val.As<Napi::BigInt>().Int64Value(&lossless);
      if (!lossless) {
        uint64_t u = val.As<Napi::BigInt>().Uint64Value(&lossless);
        s = static_cast<int64_t>(u);
      }
      if (!lossless) {
        ThrowRange(env, "decision value must fit in 64 bits");
        return false;
      }
      out->value = s;
      return true;
    }
    if (val.IsNumber() && std::isfinite(val.As<Napi::Number>().DoubleValue()) &&
        val.As<Napi::Number>().DoubleValue() == std::floor(val.As<Napi::Number>().DoubleValue())) {
      out->value = val.As<Napi::Number>().Int64Value();
      return true;
    }
    ThrowType(env, "decision value must be a bigint");
    return false;
  }
  ThrowType(env, std::string("unknown ") + (allow_value ? "decision" : "default action") + " kind \"" + k +
                     "\" (expected continue, error" + (allow_value ? ", value, mkdir, mount, kill, freeze)" : ")"));
  return false;
}

// A path-like property as the bytes the kernel gets: a Uint8Array (a Buffer) exactly as given,
// or a string as UTF-8 (lossy for names that are not UTF-8: kept for callers that have no bytes).
// No NUL bytes (the kernel would stop at the first one).
bool ParseBytes(Napi::Object obj, const char* name, std::string* out) {
  Napi::Env env = obj.Env();
  Napi::Value v = obj.Get(name);
  if (env.IsExceptionPending()) return false;
  if (v.IsTypedArray() && v.As<Napi::TypedArray>().TypedArrayType() == napi_uint8_array) {
    Napi::Uint8Array bytes = v.As<Napi::Uint8Array>();
    out->assign(reinterpret_cast<const char*>(bytes.Data()), bytes.ByteLength());
  } else if (v.IsString()) {
    *out = v.As<Napi::String>().Utf8Value();
  } else {
    ThrowType(env, std::string("decision ") + name + " must be a Uint8Array (bytes) or a string");
    return false;
  }
  if (out->find('\0') != std::string::npos) {
    ThrowRange(env, std::string("decision ") + name + " must not contain NUL bytes");
    return false;
  }
  return true;
}

// An integer property in [min, max].
bool ParseInteger(Napi::Object obj, const char* name, double min, double max, double* out) {
  Napi::Env env = obj.Env();
  Napi::Value v = obj.Get(name);
  if (env.IsExceptionPending()) return false;
  if (!v.IsNumber()) {
    ThrowType(env, std::string("decision ") + name + " must be a number");
    return false;
  }
  double d = v.As<Napi::Number>().DoubleValue();
  if (!(d >= min && d <= max) || d != std::floor(d)) {
    ThrowRange(env, std::string("decision ") + name + " must be an integer from " + std::to_string(static_cast<long long>(min)) +
                        " to " + std::to_string(static_cast<long long>(max)) + ", got " + v.ToString().Utf8Value());
    return false;
  }
  *out = d;
  return true;
}

// The emulated kinds (emulation_table.hpp, by name); false with a JS exception pending otherwise.
// *matched is false when `kind` is none of them (the caller tries the immediate kinds).
bool ParseEmulated(Napi::Env env, Napi::Object obj, const std::string& kind, bool* matched, Engine::EmulatedDecision* out) {
  const EmulationRow* row = EmulationNamed(kind);
  *matched = row != nullptr;
  if (row == nullptr) return false;
  out->kind = row->kind;
  double d = 0;
  switch (row->shape) {
    case EmulationShape::kPathCall:
      if (!ParseBytes(obj, "path", &out->mkdir.path) || !ParseInteger(obj, "mode", 0, 07777, &d)) return false;
      out->mkdir.mode = static_cast<uint32_t>(d);
      return true;
    case EmulationShape::kMount: {
      if (!ParseBytes(obj, "source", &out->mount.source) || !ParseBytes(obj, "target", &out->mount.target) ||
          !ParseBytes(obj, "fstype", &out->mount.fstype) || !ParseBytes(obj, "data", &out->mount.data)) {
        return false;
      }
      if (out->mount.fstype.empty()) {
        // The helper would refuse it as a bad request, which nobody answers.
        ThrowRange(env, "decision fstype must not be empty");
        return false;
      }
      Napi::Value flags = obj.Get("flags");
      if (env.IsExceptionPending()) return false;
      bool lossless = false;
      if (flags.IsBigInt()) {
        out->mount.flags = flags.As<Napi::BigInt>().Uint64Value(&lossless);
      } else if (flags.IsNumber()) {
        double f = flags.As<Napi::Number>().DoubleValue();
        lossless = f >= 0 && f <= 9007199254740991.0 && f == std::floor(f);
        out->mount.flags = lossless ? static_cast<uint64_t>(f) : 0;
      }
      if (!lossless) {
        ThrowRange(env, "decision flags must be an unsigned 64-bit bigint");
        return false;
      }
      Napi::Value cap = obj.Get("requireCapSysAdmin");
      if (env.IsExceptionPending()) return false;
      if (!cap.IsBoolean() && !cap.IsUndefined()) {
        ThrowType(env, "decision requireCapSysAdmin must be a boolean");
        return false;
      }
      out->mount.require_cap_sys_admin = cap.IsBoolean() && cap.As<Napi::Boolean>().Value();
      return true;
    }
    case EmulationShape::kKill: {
      if (!ParseInteger(obj, "signal", 1, 64, &d)) return false;
      out->kill.signal = static_cast<int>(d);
      if (!ParseInteger(obj, "initPid", 0, 2147483647.0, &d)) return false;
      out->kill.init_pid = static_cast<pid_t>(d);
      Napi::Value e = obj.Get("errno");
      return !env.IsExceptionPending() && ParseErrno(env, e, &out->error);
    }
    case EmulationShape::kFreeze: {
      Napi::Value e = obj.Get("errno");
      return !env.IsExceptionPending() && ParseErrno(env, e, &out->error);
    }
  }
  return false;
}

bool ParseUint32(Napi::Env env, Napi::Value v, const char* what, uint32_t* out) {
  if (!v.IsNumber()) {
    ThrowType(env, std::string(what) + " must be a number");
    return false;
  }
  double d = v.As<Napi::Number>().DoubleValue();
  if (!(d >= 0 && d <= 4294967295.0) || d != std::floor(d)) {
    ThrowRange(env, std::string(what) + " must be an integer from 0 to 2^32-1");
    return false;
  }
  *out = static_cast<uint32_t>(d);
  return true;
}

// A session number: an integer from `min` to 2^53-1 (JS numbers stay exact).
bool ParseSession(Napi::Env env, Napi::Value v, const char* what, double min, uint64_t* out) {
  if (!v.IsNumber()) {
    ThrowType(env, std::string(what) + ": session must be a number");
    return false;
  }
  double d = v.As<Napi::Number>().DoubleValue();
  if (!(d >= min && d <= 9007199254740991.0) || d != std::floor(d)) {
    ThrowRange(env, std::string(what) + ": session must be an integer from " + std::to_string(static_cast<int>(min)) +
                        " to 2^53-1, got " + v.ToString().Utf8Value());
    return false;
  }
  *out = static_cast<uint64_t>(d);
  return true;
}

// A policy in force as JS sees it (NativePolicyState), or null.
Napi::Value PolicyState(Napi::Env env, const std::shared_ptr<const PolicyInForce>& policy) {
  if (!policy) return env.Null();
  Napi::Object p = Napi::Object::New(env);
  Napi::Object labels = Napi::Object::New(env);
  for (const auto& label : policy->set.labels) labels.Set(label.first, label.second);
  p.Set("version", Napi::String::New(env, policy->set.version));
  p.Set("rules", Napi::Number::New(env, static_cast<double>(policy->set.rules.size())));
  p.Set("labels", labels);
  return p;
}

}  // namespace seccomp_agent
