#include "engine_binding.hpp"
// Placeholder until the engine lands.
void RegisterEngine(Napi::Env, Napi::Object) {}
