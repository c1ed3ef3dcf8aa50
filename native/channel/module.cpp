// The control plane's channel addon: the socket's nonblocking reads and writes, and the
// shared-memory rings (docs/decision-channel.md).
#include "channel_io.hpp"

namespace {

napi_value Init(napi_env env, napi_value exports) {
  channel_io::RegisterSocketIo(env, exports);
  channel_io::RegisterRingIo(env, exports);
  return exports;
}

}  // namespace

NAPI_MODULE(seccomp_channel_io, Init)
