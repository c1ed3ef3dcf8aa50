// The successor's side of a planned handoff for JS: connect, receive, ack, wait for the old one to
// let go (see handoff.hpp). Each call blocks the JS thread; they run before the data plane serves.
#pragma once
#include <napi.h>

void RegisterHandoff(Napi::Env env, Napi::Object exports);
