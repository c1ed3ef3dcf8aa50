// The control plane's nonblocking reads and writes of the decision channel's socket: one syscall
// each, with no stream machinery, no callback scope and no exception for "nothing yet" (-EAGAIN
// is a return value). The control plane calls them from its busy poll (docs/decision-channel.md).
#include <errno.h>
#include <stdint.h>
#include <sys/socket.h>
#include <unistd.h>

#include <vector>

#include "channel_io.hpp"
#include "scm_rights.h"

namespace channel_io {

// (fd, bytes) -> the fd and the bytes' memory; false (a TypeError thrown) for anything else.
bool Arguments(napi_env env, napi_callback_info info, const char* usage, int32_t* fd, uint8_t** data, size_t* length) {
  size_t argc = 2;
  napi_value argv[2];
  bool is_typed = false;
  if (napi_get_cb_info(env, info, &argc, argv, nullptr, nullptr) != napi_ok || argc < 2 ||
      napi_get_value_int32(env, argv[0], fd) != napi_ok || napi_is_typedarray(env, argv[1], &is_typed) != napi_ok || !is_typed) {
    napi_throw_type_error(env, nullptr, usage);
    return false;
  }
  napi_typedarray_type type;
  void* bytes = nullptr;
  if (napi_get_typedarray_info(env, argv[1], &type, length, &bytes, nullptr, nullptr) != napi_ok || type != napi_uint8_array) {
    napi_throw_type_error(env, nullptr, usage);
    return false;
  }
  *data = static_cast<uint8_t*>(bytes);
  return true;
}

napi_value Result(napi_env env, ssize_t n) {
  napi_value value;
  napi_create_int32(env, n < 0 ? -errno : static_cast<int32_t>(n), &value);
  return value;
}

// One nonblocking syscall on (fd, bytes) from JS, EINTR retried: its count, or -errno.
template <typename Syscall>
napi_value Call(napi_env env, napi_callback_info info, const char* usage, Syscall syscall) {
  int32_t fd;
  uint8_t* data;
  size_t length;
  if (!Arguments(env, info, usage, &fd, &data, &length)) return nullptr;
  ssize_t n;
  do n = syscall(fd, data, length);
  while (n < 0 && errno == EINTR);
  return Result(env, n);
}

// recv(fd, into: Uint8Array) -> bytes read, 0 at end of stream, or -errno (-EAGAIN: nothing yet).
napi_value Recv(napi_env env, napi_callback_info info) {
  return Call(env, info, "recv(fd: number, into: Uint8Array)",
              [](int fd, uint8_t* data, size_t length) { return recv(fd, data, length, MSG_DONTWAIT); });
}

// send(fd, bytes: Uint8Array) -> bytes written (maybe fewer than given), or -errno (-EAGAIN: full).
napi_value Send(napi_env env, napi_callback_info info) {
  return Call(env, info, "send(fd: number, bytes: Uint8Array)",
              [](int fd, uint8_t* data, size_t length) { return send(fd, data, length, MSG_DONTWAIT | MSG_NOSIGNAL); });
}

// recvWithFd(fd, into: Uint8Array) -> [bytes read | -errno, the fd that came with them | -1]: the
// handshake's read, whose Ready frame may carry the rings' memfd. Any further fd is closed.
napi_value RecvWithFd(napi_env env, napi_callback_info info) {
  int32_t fd;
  uint8_t* data;
  size_t length;
  if (!Arguments(env, info, "recvWithFd(fd: number, into: Uint8Array)", &fd, &data, &length)) return nullptr;
  struct iovec iov = {data, length};
  std::vector<int> fds;
  bool truncated = false;
  const ssize_t n = scm_rights::Receive(fd, &iov, 1, MSG_DONTWAIT, &fds, &truncated);
  const int err = errno;
  for (size_t i = 1; i < fds.size(); i++) close(fds[i]);
  napi_value result, count, received;
  napi_create_array_with_length(env, 2, &result);
  napi_create_int32(env, n < 0 ? -err : static_cast<int32_t>(n), &count);
  napi_create_int32(env, fds.empty() ? -1 : fds[0], &received);
  napi_set_element(env, result, 0, count);
  napi_set_element(env, result, 1, received);
  return result;
}

void RegisterSocketIo(napi_env env, napi_value exports) {
  const napi_property_descriptor functions[] = {
      {"recv", nullptr, Recv, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"send", nullptr, Send, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
      {"recvWithFd", nullptr, RecvWithFd, nullptr, nullptr, nullptr, napi_enumerable, nullptr},
  };
  napi_define_properties(env, exports, sizeof functions / sizeof functions[0], functions);
}

}  // namespace channel_io
