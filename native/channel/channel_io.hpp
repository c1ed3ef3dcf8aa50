// The control plane's channel addon (seccomp_channel_io.node): its parts and the argument checks
// they share. Raw N-API: these calls are on the control plane's per-decision path.
#pragma once
#include <node_api.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

namespace channel_io {

// (fd, bytes: Uint8Array, ...) -> the fd and the bytes' memory; false (a TypeError thrown) otherwise.
bool Arguments(napi_env env, napi_callback_info info, const char* usage, int32_t* fd, uint8_t** data, size_t* length);
// A syscall's result as JS sees it: the count, or -errno.
napi_value Result(napi_env env, ssize_t n);

void RegisterSocketIo(napi_env env, napi_value exports);  // socket_io.cpp
void RegisterRingIo(napi_env env, napi_value exports);    // ring_io.cpp

}  // namespace channel_io
