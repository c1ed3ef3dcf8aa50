// The seccomp user-notification ioctls on a listener fd, with buffers sized as the running kernel
// says (SECCOMP_GET_NOTIF_SIZES), so a newer kernel with larger structs never overruns them.
#pragma once
#include <errno.h>
#include <linux/seccomp.h>
#include <string.h>
#include <sys/ioctl.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace seccomp_agent {

// What a notification is answered with.
struct Answer {
  enum Kind : uint8_t { kContinue = 0, kError = 1, kValue = 2 };
  Kind kind = kContinue;
  int32_t error = 0;  // errno (positive) for kError
  int64_t value = 0;  // return value for kValue
};

// Result of NotifySend.
enum class SendResult { kOk, kGone, kFailed };

// Buffers for one thread's RECV/SEND calls. Not shared between threads.
class NotifyBuffers {
 public:
  // Any thread. Asks the kernel for the struct sizes once per instance.
  NotifyBuffers();
  struct seccomp_notif* notif() { return reinterpret_cast<struct seccomp_notif*>(notif_.data()); }
  struct seccomp_notif_resp* resp() { return reinterpret_cast<struct seccomp_notif_resp*>(resp_.data()); }

 private:
  std::vector<uint64_t> notif_;  // uint64_t elements: aligned for the structs
  std::vector<uint64_t> resp_;
  size_t notif_bytes_ = 0;
  size_t resp_bytes_ = 0;
  friend bool NotifyRecv(int fd, NotifyBuffers* buffers);
  friend inline SendResult NotifySend(int fd, NotifyBuffers* buffers, uint64_t id, const Answer& answer, int* err);
};

// One NOTIF_RECV. Returns false on ENOENT/EINTR/other errors (errno kept); the caller retries on
// the next readiness. Call only after epoll reported the fd readable: RECV blocks otherwise.
bool NotifyRecv(int fd, NotifyBuffers* buffers);

// NOTIF_SEND of `answer` for `id`. kGone: ENOENT (the target died or was interrupted, normal).
// kFailed: any other error, errno value in *err. Inline: the engine's hot path has no frame of
// its own live across the switch the SEND makes (engine_loop.cpp, OnNotifyReady).
inline SendResult NotifySend(int fd, NotifyBuffers* buffers, uint64_t id, const Answer& answer, int* err) {
  memset(buffers->resp_.data(), 0, buffers->resp_bytes_);
  struct seccomp_notif_resp* resp = buffers->resp();
  resp->id = id;
  switch (answer.kind) {
    case Answer::kContinue:
      resp->flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE;
      break;
    case Answer::kError:
      resp->error = -answer.error;
      break;
    case Answer::kValue:
      resp->val = answer.value;
      break;
  }
  for (;;) {
    if (ioctl(fd, SECCOMP_IOCTL_NOTIF_SEND, resp) == 0) return SendResult::kOk;
    if (errno == EINTR) continue;
    if (errno == ENOENT) return SendResult::kGone;
    if (err != nullptr) *err = errno;
    return SendResult::kFailed;
  }
}

// NOTIF_SEND of `-err` for `id`, one call, from a thread without NotifyBuffers (the executors:
// the action worker, the helper pool). False with *send_err = its errno (ENOENT: the target died
// or was interrupted). The one errno answer outside NotifySend.
bool NotifySendErrno(int fd, uint64_t id, int err, int* send_err);

// NOTIF_ID_VALID: true while the task that caused `id` is still waiting for an answer.
bool NotifyIdValid(int fd, uint64_t id);

// NOTIF_SET_FLAGS(SYNC_WAKE_UP): the answer wakes the target on the answering CPU (6.6+); `on`
// false clears the flag (the scheduler places the target, wake_mode.hpp). Returns false on
// kernels without it.
bool NotifySetSyncWakeUp(int fd, bool on = true);

// Whether fd is a seccomp notify fd: an anon-inode fd (the filesystem of an eventfd) that answers
// NOTIF_ID_VALID as only a notify fd does (ENOENT for id 0). No other anon-inode file takes the
// ioctl type '!' (seccomp's own), so nothing else acts on it; and unlike a /proc/self/fd readlink
// (about 6 µs each on a VM: a restore with 1,000 containers spent 6 ms in them) it walks no path.
bool IsSeccompNotifyFd(int fd);

}  // namespace seccomp_agent
