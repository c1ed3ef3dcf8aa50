// Restarted calls (docs/emulation.md, "Exactly once"): the outcome of an emulation whose effect
// happened but whose answer may never have reached its target, kept for the call the kernel
// restarts.
//
// Without SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV (Debian's runc never sets it), a signal ends the
// target's wait for a notification this helper holds: its NOTIF_SEND then fails with ENOENT while
// the target lives, and with SA_RESTART (Go's runtime takes SIGURG all the time) the same thread
// makes the same call again as a new notification. Done again, the mkdir says EEXIST for a
// directory the program never saw made; a mount stacks a second mount. So the helper notes what it
// did, and answers the restarted call with that outcome instead of acting again.
//
// A NOTIF_SEND that returns 0 is no proof either: when the signal comes just before it, the
// kernel takes the answer and yet the woken target, which had already left its wait, restarts the
// call and drops it (kernel/seccomp.c: the interrupted path does not look at the reply). So an
// effect's answer is one whose delivery the kernel confirms (nshelper_answer.hpp): taken, nothing
// is kept, and the program's own second call gets what the kernel says; dropped, the outcome is
// kept for the restart (kKeepNs). Only an answer that had to be a plain NOTIF_SEND (no fd 0 to give
// back) is kept briefly as "delivered" (kDeliveredKeepNs), at the price documented in
// docs/emulation.md: the very same call repeated by the program within that second, while what it
// made is still in place, gets the first outcome (0) again where a kernel would say EEXIST.
//
// The notes live in the replay book (replay_book.h), one partition per mount namespace, which
// outlives this process and the data plane: a helper left finishing its request when its data
// plane died notes there, and the successor's helper for the same namespace reads there, after
// the partition's lock says the old one is done. Nothing else on the path pays for it: a lookup
// is a scan of the partition's few entries.
//
// The key is narrow: the same task (its pidfs inode: unique for the life of the node), the same
// syscall with the same six arguments, and the same strings and fields the data plane sent (the
// path bytes it read, as the policy rewrote them). A mkdir is replayed only while the directory it
// made is still the entry at that name; otherwise the call is new and done anew.
//
// A helper can also die (OOM, an operator's kill) between its act and its answer, and the pool
// then gives the request to a fresh helper. So an entry is written before the act too (kIntent:
// one store into the mapping), marked right after it (kActed, with the directory made), and
// settled after the answer; the fresh helper, which takes the lock the dead one's death released,
// finds it and decides from it (nshelper_recovery.hpp) instead of acting twice.
#pragma once
#include <fcntl.h>
#include <stdint.h>
#include <sys/types.h>

#include <string>

#include "nshelper_protocol.h"
#include "replay_book.h"
#include "unique_fd.h"

namespace nshelper {

// The entry a request may restart or recover, found before acting and checked where it acts.
struct Candidate {
  int index = -1;
  replay_book::Entry entry = {};  // a copy, as found
};

class ReplayBook {
 public:
  static constexpr size_t kPerTask = 8;
  // How long a restart is waited for after an abandoned answer: a stopped or frozen task restarts
  // its call when it runs again, so this is long; the key keeps it from matching anything else.
  static constexpr uint64_t kKeepNs = 60ull * 1000000000ull;
  // ... and after a plain NOTIF_SEND whose delivery is unknown, which a restart follows at once or
  // never (measured: within 2.3 ms under a 100 µs signal storm), so a program's own repeat is
  // rarely taken for one.
  static constexpr uint64_t kDeliveredKeepNs = 1000000000ull;

  // Maps partition `partition` of the book at replay_book::kBookFd. False (with errno) when it is
  // not a book: the helper then serves without one (no replay). `intent_keep_ns`: how long an
  // intent or an unanswered act left by a helper that died stays (the pool's request timeout: its
  // retry comes sooner or never).
  bool Open(uint32_t partition, uint64_t intent_keep_ns);
  bool enabled() const { return entries_ != nullptr; }
  // The partition's lock, around a whole request or burst of them (blocks while another helper holds it).
  void Lock() { SetLock(F_WRLCK); }
  void Unlock() { SetLock(F_UNLCK); }

  static uint64_t Hash(const std::string* strings);
  // The entry `req` may restart or recover (same call and strings, not expired; the caller checks
  // the task and the effect), or index -1.
  Candidate Find(const Request& req, uint64_t strings_hash, uint64_t task_ino, uint64_t now_ns);
  // Before `req` acts: an entry in state kIntent with what a retry needs if this helper dies
  // before its answer (mkdir: `realtime_ns`; mount: `mnt_id`). Its index, or -1 (no book, no room).
  int Intend(const Request& req, uint64_t strings_hash, uint64_t task_ino, uint64_t realtime_ns, uint64_t mnt_id,
             uint64_t now_ns);
  // Right after the act (mkdir: the directory made; mount: 0, 0): kActed.
  void Acted(int index, uint64_t made_dev, uint64_t made_ino);
  // After the answer: `delivered` a plain NOTIF_SEND took it (delivery unknown), else the target
  // left its wait without it. Also for a restarted call answered again: kept for the next.
  void Settle(int index, bool delivered, uint64_t now_ns);
  void Erase(int index);
  size_t size() const;

 private:
  void SetLock(short type);
  uint64_t KeepNs(const replay_book::Entry& e) const;
  static bool Matches(const replay_book::Entry& e, const Request& req, uint64_t strings_hash, uint64_t task_ino);
  // A free slot for a new entry of `req`, else the one to give up; nullptr when none may go.
  // `precaution`: the new entry may displace only delivered ones (precautions themselves).
  replay_book::Entry* PickSlot(const Request& req, uint64_t strings_hash, uint64_t task_ino, bool precaution,
                               uint64_t now_ns);

  replay_book::Entry* entries_ = nullptr;
  Fd lock_;  // this process's own open file description of the book: its OFD locks are its own
  uint64_t lock_start_ = 0;
  uint64_t intent_keep_ns_ = 0;
};

}  // namespace nshelper
