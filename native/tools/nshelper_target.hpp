// The helper's view of a notifying task (native/tools/nshelper.cpp): its /proc directory, proven
// to be the task that notified, and who it is (credentials from /proc/<pid>/status).
//
// A task that notifies once usually notifies again (a container's process making directories), so
// its /proc directory and status file stay open between requests, a few tasks at a time: opening
// them is two path walks through procfs, which on a VM with speculative-execution mitigations is
// a good part of a request (docs/benchmarks.md, "The emulated mkdir (e), third pass"). Why a kept
// directory can be trusted again is written at TargetCache::Open.
#pragma once
#include <stdint.h>
#include <sys/types.h>

#include <vector>

#include "namespace_link.h"
#include "nshelper_protocol.h"
#include "unique_fd.h"

namespace nshelper {

// Outcome of one step: errno (0 = fine) and the stage it belongs to.
struct Status {
  int err = 0;
  uint16_t stage = kStageDone;
  bool ok() const { return err == 0 && stage == kStageDone; }
};

inline Status Fail(uint16_t stage, int err) { return Status{err, stage}; }

struct Credentials {
  uid_t fsuid = 0;
  gid_t fsgid = 0;
  std::vector<gid_t> groups;
  mode_t umask = 022;
  uint64_t cap_eff = 0;
  bool init_userns = true;
  // The task's State letter ('S' sleeping, 'D' uninterruptible...), 0 when absent: how it waits
  // for the answer tells whether its filter has WAIT_KILLABLE_RECV (nshelper_protocol.h).
  char state = 0;
};

// The task of one request. pid_dir and status belong to the cache and stay valid for the request.
struct Target {
  int pid_dir = -1;  // /proc/<pid>, bound to that task: no pid reuse through it
  int status = -1;   // /proc/<pid>/status of that task, read from offset 0 each time
  Fd root;           // the task's root directory (O_PATH), opened for this request
  int notify_fd = -1;
  uint64_t notif_id = 0;
  pid_t pid = 0;

  bool StillPending() const;
};

// Fills Uid/Gid (4th field: fs), Groups, Umask and CapEff from the text of /proc/<pid>/status.
// False when Uid, Gid or CapEff is missing (a cut file: groups past what was read are dropped, which
// can only take permissions away). Pure: no syscall.
bool ParseProcStatus(const char* text, Credentials* c);

class TargetCache {
 public:
  // Opens the host's /proc and learns the helper's own user namespace. False with errno set.
  bool Init();

  // The task that sent notification `req.notif_id` of `notify_fd`, checked still pending.
  Status Open(const Request& req, int notify_fd, Target* t);
  // Who the task is now: its status file read afresh, and whether it is in the helper's user namespace.
  Status ReadCredentials(const Target& t, Credentials* c);
  // The pidfs inode of the task of `t` (opened by Open): one number for its whole life, never
  // another task's; learnt once per kept task. 0 when it cannot be had.
  uint64_t TaskIno(const Target& t);
  // The task's own pidfd (PIDFD_THREAD: its own descriptor table), and its /proc/<pid>/fdinfo/0
  // (rendered afresh at each read from offset 0), opened once per kept task; -1 when they cannot be.
  int ThreadPidfd(const Target& t);
  int StdinInfo(const Target& t);

 private:
  struct Entry {
    pid_t pid = 0;
    Fd dir;
    Fd status;
    uint64_t used = 0;  // the request count when last used: the least recent is replaced
    uint64_t task_ino = 0;  // TaskIno, once learnt
    Fd pidfd;               // ThreadPidfd, once opened
    Fd stdin_info;          // StdinInfo, once opened
    void Clear() {
      pid = 0;
      task_ino = 0;
      pidfd.Reset();
      stdin_info.Reset();
      status.Reset();
      dir.Reset();
    }
  };
  static constexpr size_t kEntries = 8;
  Entry* Find(pid_t pid);
  Entry* LeastRecentlyUsed();
  bool Refill(Entry* entry, pid_t pid);

  Fd proc_;
  NamespaceLinkText own_userns_;  // the helper's own ns/user link: "user:[<inode>]"
  Entry entries_[kEntries];
  uint64_t requests_ = 0;
};

}  // namespace nshelper
