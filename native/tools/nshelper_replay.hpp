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
// A successful answer is no proof either: when the signal comes just before NOTIF_SEND, the kernel
// takes the answer (NOTIF_SEND returns 0) and yet the woken target, which had already left its
// wait, restarts the call and drops it (kernel/seccomp.c: the interrupted path does not look at
// the reply). Measured here: 7 such in 3,000 mkdirs under a 50 µs timer. So an answered emulation
// is noted too, briefly ("delivered": kDeliveredKeepNs), and its restart gets the same outcome.
// The price, documented in docs/emulation.md: the very same call (same thread, arguments, path)
// repeated by the program within that second, while what it made is still in place, gets the
// first outcome (0) again where a kernel would say EEXIST.
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
#pragma once
#include <fcntl.h>
#include <stdint.h>
#include <sys/types.h>

#include <string>

#include "nshelper_protocol.h"
#include "replay_book.h"
#include "unique_fd.h"

namespace nshelper {

// What an emulation changed, so a replay can check it is still there.
struct Effect {
  Fd parent;         // mkdir: the directory it was made in (O_PATH)
  std::string last;  // mkdir: the name made there
};

// The entry a request may restart, found before acting and checked where it acts.
struct Candidate {
  int index = -1;
  uint64_t made_dev = 0;
  uint64_t made_ino = 0;
};

class ReplayBook {
 public:
  static constexpr size_t kPerTask = 8;
  // How long a restart is waited for after an abandoned answer: a stopped or frozen task restarts
  // its call when it runs again, so this is long; the key keeps it from matching anything else.
  static constexpr uint64_t kKeepNs = 60ull * 1000000000ull;
  // ... and after a delivered one, which a restart follows at once or never (measured: within
  // 0.1 s under a 50 µs signal storm), so a program's own repeat is rarely taken for one.
  static constexpr uint64_t kDeliveredKeepNs = 1000000000ull;

  // Maps partition `partition` of the book at replay_book::kBookFd. False (with errno) when it is
  // not a book: the helper then serves without one (no replay).
  bool Open(uint32_t partition);
  bool enabled() const { return entries_ != nullptr; }
  // The partition's lock, around a whole request (blocks while another helper holds it).
  void Lock() { SetLock(F_WRLCK); }
  void Unlock() { SetLock(F_UNLCK); }

  static uint64_t Hash(const std::string* strings);
  // The entry `req` may restart (same call and strings, not expired; the caller checks the task
  // and the effect), or index -1.
  Candidate Find(const Request& req, uint64_t strings_hash, uint64_t task_ino, uint64_t now_ns);
  // After `req` acted (err 0) and answered it: `delivered` NOTIF_SEND succeeded, else it found the
  // target gone from its wait (ENOENT). An abandoned note never gives way to a delivered one.
  void Note(const Request& req, uint64_t strings_hash, uint64_t task_ino, const Effect& effect, bool delivered,
            uint64_t now_ns);
  // The restarted call was answered again: `delivered` as for Note, the entry kept for the next.
  void Renew(int index, bool delivered, uint64_t now_ns);
  void Erase(int index);
  size_t size() const;

 private:
  void SetLock(short type);
  static uint64_t KeepNs(const replay_book::Entry& e) { return e.delivered ? kDeliveredKeepNs : kKeepNs; }
  static bool Matches(const replay_book::Entry& e, const Request& req, uint64_t strings_hash, uint64_t task_ino);

  replay_book::Entry* entries_ = nullptr;
  Fd lock_;  // this process's own open file description of the book: its OFD locks are its own
  uint64_t lock_start_ = 0;
};

}  // namespace nshelper
