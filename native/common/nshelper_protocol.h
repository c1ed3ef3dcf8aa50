// Wire protocol between the data plane (native/addon/nshelper_pool.cpp) and its helper process
// (native/tools/nshelper.cpp). One SOCK_SEQPACKET message per request, so a message is never split
// or merged; fixed little-endian structs, both ends built from this header in one build, so no
// field is ever reinterpreted across versions (the version is still checked).
//
// Responses go the other way through a ring in memory the two share (ReplyRing, a memfd at
// kRepliesFd), and the socket carries only a doorbell that wakes the pool thread to read it. A
// helper that answered its target itself rings once every kDoorbellEvery such responses, or when
// it goes idle: the pool's bookkeeping of a call nobody waits for costs no wake-up of its thread
// per call (docs/emulation.md, "Replies"). Whatever rang, the pool takes every response posted,
// and looks at the ring again before it declares a request timed out.
//
// A request carries the container's seccomp notify fd as SCM_RIGHTS: the helper itself re-checks
// SECCOMP_IOCTL_NOTIF_ID_VALID after it has opened /proc/<pid>/... and before it acts, and, when
// asked, answers the notification itself (SECCOMP_IOCTL_NOTIF_SEND) so the target wakes without a
// hop back through the data plane.
#pragma once
#include <stdint.h>

#include <atomic>

namespace nshelper {

constexpr uint32_t kMagic = 0x3148534e;  // "NSH1"
constexpr uint16_t kVersion = 3;  // 2: the notification's syscall and arguments; 3: the reply ring

// The helper is started with its end of the socketpair as this fd, and its reply ring as the next.
constexpr int kSocketFd = 3;
constexpr int kRepliesFd = 4;

// Longest string the helper accepts in one field (PATH_MAX and one page of mount data).
constexpr uint32_t kMaxString = 4096;

enum Op : uint16_t {
  kOpPing = 1,   // answers with err 0; used to check a helper is alive
  kOpMkdir = 2,  // mkdir/mkdirat: strings[0] = path
  kOpMount = 3,  // mount: strings[0] = source, [1] = target, [2] = fstype, [3] = data
};

enum RequestFlags : uint32_t {
  // Answer the notification with NOTIF_SEND (error = -err) after acting.
  kRespond = 1u << 0,
  // Mount only: refuse with EPERM unless the target has CAP_SYS_ADMIN in a user namespace
  // created by root that owns its mount namespace.
  kRequireCapSysAdmin = 1u << 1,
  // With kRespond: nobody waits for the response (the data plane's rules record the result only),
  // so a helper that busy-polls may ring for it with later ones, or when it goes idle (below).
  kReplyMayWait = 1u << 2,
};

// Why a request ended, for logs and metrics; `err` carries the errno.
enum Stage : uint16_t {
  kStageDone = 0,      // acted; err is the syscall's own result (0 or its errno)
  kStageBadRequest,    // malformed request (EINVAL)
  kStageOpenProc,      // /proc/<pid>/... could not be opened: the target is gone (ESRCH)
  kStageStale,         // NOTIF_ID_VALID said the notification is no longer pending: nothing done
  kStageCredentials,   // reading or taking the target's credentials failed
  kStageOutsideRoot,   // the cwd or dirfd lies outside the target's root: refused (EPERM)
  kStageResolve,       // resolving the parent directory inside the root failed (its errno)
  kStagePermission,    // the CAP_SYS_ADMIN check refused (EPERM)
  kStageNamespace,     // entering the target's namespaces for a mount failed
  kStageInternal,      // fork, wait, or another helper-side failure
  kStageConfine,       // mount: the new mount could not be confined to what the container has (EPERM)
};

struct Request {
  uint32_t magic;
  uint16_t version;
  uint16_t op;
  uint64_t tag;       // echoed in the response
  uint64_t notif_id;  // seccomp notification id to validate (and answer)
  int32_t pid;        // the notifying task, in the helper's (host) pid namespace
  uint32_t flags;     // RequestFlags
  int32_t dirfd;      // mkdir: AT_FDCWD (-100) or the target's own fd number (mkdirat)
  uint32_t mode;      // mkdir: mode before the target's umask
  uint64_t mount_flags;  // mount: MS_* as the target passed them
  uint32_t len[4];       // byte length of each string (no NUL), packed after this struct
  // The notification as the kernel reported it: with the strings, the key by which a call that a
  // signal restarted is told from a new one (nshelper_replay.hpp). Zero: not known (tests).
  uint32_t nr;
  uint32_t arch;
  uint64_t args[6];
};

enum ResponseFlags : uint32_t {
  kAnswered = 1u << 0,  // NOTIF_SEND succeeded: the target has its result
  // The call is one a signal restarted after this helper had already done its work for it (the
  // answer then found the target gone from its wait), or one whose first helper died after acting:
  // answered with that outcome, nothing done again.
  kReplayed = 1u << 1,
  // How the target waited while the helper worked, from its /proc status (the helper reads it for
  // the credentials anyway): 'D' is the killable wait of a filter with
  // SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV (signals cannot abandon the notification), 'S' the
  // interruptible wait of one without. Neither: not seen (running at that instant, or no status read).
  kTargetWaitKillable = 1u << 2,
  kTargetWaitInterruptible = 1u << 3,
  // Set by the pool, never by a helper: the helper first given this request died with it in hand,
  // and a fresh one served it (its intent in the replay book says what the dead one had done).
  kRetriedAfterHelperDeath = 1u << 4,
};

struct Response {
  uint32_t magic;
  uint16_t version;
  uint16_t stage;  // Stage
  uint64_t tag;
  int32_t err;       // 0 or a positive errno: what the target's syscall returns
  uint32_t flags;    // ResponseFlags
  int32_t send_err;  // errno of NOTIF_SEND when kRespond was asked and it failed (ENOENT: gone)
  uint32_t reserved;
  uint64_t helper_ns;  // time spent in the helper from receipt to answer
};

constexpr uint32_t kMaxRequestBytes = sizeof(Request) + 4 * kMaxString;

// Responses posted and not yet taken never exceed the requests the pool has sent and not seen
// answered, which its window (8) bounds: a helper that finds the ring full is out of step and exits.
constexpr uint32_t kReplySlots = 16;
// A helper rings after this many responses nobody waits for (kReplyMayWait) while it polls: the
// pool frees their window room and writes their events in batches, well before the window fills.
constexpr uint32_t kDoorbellEvery = 4;

// Single producer (the helper: slots, then head) and single consumer (the pool thread: tail).
// Indices run freely; slot = index % kReplySlots. std::atomic<uint32_t> is lock-free, hence
// address-free: the same object through two mappings in two processes.
struct ReplyRing {
  alignas(64) std::atomic<uint32_t> head;
  alignas(64) std::atomic<uint32_t> tail;
  alignas(64) Response slots[kReplySlots];
};
static_assert(std::atomic<uint32_t>::is_always_lock_free, "the reply ring needs lock-free atomics");

// The socket's only message from helper to pool: "the ring has responses".
constexpr uint32_t kDoorbellMagic = 0x4c4c4542;  // "BELL"
struct Doorbell {
  uint32_t magic;
};

}  // namespace nshelper
