// The notifying task as the helper finds it (nshelper_target.hpp).
#include "nshelper_target.hpp"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "seccomp_compat.h"

namespace nshelper {
namespace {

// Skips blanks (never a line's end), then reads one unsigned number in `base` (10, 8 or 16); false
// when none starts there.
bool TakeNumber(const char** p, int base, unsigned long long* out) {
  while (**p == ' ' || **p == '\t') ++*p;
  const char first = **p;
  if (!(base == 16 ? isxdigit(static_cast<unsigned char>(first)) : first >= '0' && first < char('0' + base))) return false;
  char* end = nullptr;
  *out = strtoull(*p, &end, base);
  if (end == *p) return false;
  *p = end;
  return true;
}

// "Uid:" and "Gid:" lines: real, effective, saved, fs. The fourth is what file access uses.
bool TakeFsId(const char* p, unsigned* out) {
  unsigned long long id = 0;
  for (int i = 0; i < 4; ++i) {
    if (!TakeNumber(&p, 10, &id)) return false;
  }
  *out = unsigned(id);
  return true;
}

bool StartsWith(const char* line, const char* key, size_t len) { return strncmp(line, key, len) == 0; }

}  // namespace

bool Target::StillPending() const {
  uint64_t id = notif_id;
  return ioctl(notify_fd, SECCOMP_IOCTL_NOTIF_ID_VALID, &id) == 0;
}

bool ParseProcStatus(const char* text, Credentials* c) {
  bool uid = false, gid = false, eff = false;
  for (const char* line = text; line != nullptr && *line != '\0';) {
    const char* next = strchr(line, '\n');
    unsigned long long value = 0;
    unsigned id = 0;
    if (StartsWith(line, "Uid:", 4) && TakeFsId(line + 4, &id)) {
      c->fsuid = id;
      uid = true;
    } else if (StartsWith(line, "Gid:", 4) && TakeFsId(line + 4, &id)) {
      c->fsgid = id;
      gid = true;
    } else if (StartsWith(line, "Umask:", 6)) {
      const char* p = line + 6;
      if (TakeNumber(&p, 8, &value)) c->umask = mode_t(value) & 0777;
    } else if (StartsWith(line, "CapEff:", 7)) {
      const char* p = line + 7;
      eff = TakeNumber(&p, 16, &value);
      c->cap_eff = value;
    } else if (StartsWith(line, "State:", 6)) {
      const char* p = line + 6;
      while (*p == ' ' || *p == '\t') p++;
      if (*p >= 'A' && *p <= 'Z') c->state = *p;
    } else if (StartsWith(line, "Groups:", 7)) {
      const char* p = line + 7;
      c->groups.clear();
      while (c->groups.size() < NGROUPS_MAX && TakeNumber(&p, 10, &value)) {
        c->groups.push_back(gid_t(value));
      }
    }
    line = next != nullptr ? next + 1 : nullptr;
  }
  return uid && gid && eff;
}

bool TargetCache::Init() {
  proc_.Reset(open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (proc_.get() < 0) return false;
  if (!ReadNamespaceLink(proc_.get(), "self/ns/user", &own_userns_)) {
    if (errno == 0) errno = EIO;
    return false;
  }
  return true;
}

TargetCache::Entry* TargetCache::Find(pid_t pid) {
  for (Entry& e : entries_) {
    if (e.pid == pid && e.dir.get() >= 0) return &e;
  }
  return nullptr;
}

TargetCache::Entry* TargetCache::LeastRecentlyUsed() {
  Entry* slot = &entries_[0];
  for (Entry& e : entries_) {
    if (e.used < slot->used) slot = &e;
  }
  return slot;
}

// Points `entry` at /proc/<pid> and its status file, opened now; false (and the entry emptied)
// when the task is gone.
bool TargetCache::Refill(Entry* entry, pid_t pid) {
  char name[16];
  snprintf(name, sizeof name, "%d", pid);
  entry->Clear();
  entry->dir.Reset(openat(proc_.get(), name, O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (entry->dir.get() < 0) return false;
  entry->status.Reset(openat(entry->dir.get(), "status", O_RDONLY | O_CLOEXEC));
  if (entry->status.get() < 0) {
    entry->Clear();
    return false;
  }
  entry->pid = pid;
  return true;
}

// A kept /proc/<pid> is bound to the struct pid of the task it was opened for, never to the number:
// once that task is reaped, every lookup in it fails (ENOENT), whoever has the number now. So when
// "root" opens through it after this notification arrived, the task it names was alive then, as was
// the notifying task, with the same pid: the same task, which NOTIF_ID_VALID afterwards shows still
// waiting. A lookup that fails through a kept entry means its task is gone: the entry is opened
// afresh, in its own slot, once.
Status TargetCache::Open(const Request& req, int notify_fd, Target* t) {
  if (req.pid <= 0 || notify_fd < 0) return Fail(kStageBadRequest, EINVAL);
  t->notify_fd = notify_fd;
  t->notif_id = req.notif_id;
  const pid_t pid = pid_t(req.pid);
  Entry* entry = Find(pid);
  const bool kept = entry != nullptr;
  if (!kept) {
    entry = LeastRecentlyUsed();
    if (!Refill(entry, pid)) return Fail(kStageOpenProc, ESRCH);
  }
  t->root.Reset(openat(entry->dir.get(), "root", O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (t->root.get() < 0 && kept) {
    if (!Refill(entry, pid)) return Fail(kStageOpenProc, ESRCH);
    t->root.Reset(openat(entry->dir.get(), "root", O_PATH | O_DIRECTORY | O_CLOEXEC));
  }
  if (t->root.get() < 0) {
    entry->Clear();
    return Fail(kStageOpenProc, ESRCH);
  }
  entry->used = ++requests_;
  t->pid = pid;
  t->pid_dir = entry->dir.get();
  t->status = entry->status.get();
  if (!t->StillPending()) return Fail(kStageStale, ENOENT);
  return {};
}

// The kept entry is proven to be the task (Open), and a live task's pid is its own: a pidfd opened
// for the pid now is that task's.
uint64_t TargetCache::TaskIno(const Target& t) {
  Entry* entry = Find(t.pid);
  if (entry == nullptr) return 0;
  struct stat st;
  if (entry->task_ino == 0 && ThreadPidfd(t) >= 0 && fstat(entry->pidfd.get(), &st) == 0) entry->task_ino = st.st_ino;
  return entry->task_ino;
}

int TargetCache::ThreadPidfd(const Target& t) {
  Entry* entry = Find(t.pid);
  if (entry == nullptr) return -1;
  constexpr unsigned kPidfdThread = O_EXCL;  // PIDFD_THREAD (6.9): a thread's own pidfd
  if (entry->pidfd.get() < 0) entry->pidfd.Reset(int(syscall(SYS_pidfd_open, t.pid, kPidfdThread)));
  return entry->pidfd.get();
}

int TargetCache::StdinInfo(const Target& t) {
  Entry* entry = Find(t.pid);
  if (entry == nullptr) return -1;
  if (entry->stdin_info.get() < 0) entry->stdin_info.Reset(openat(entry->dir.get(), "fdinfo/0", O_RDONLY | O_CLOEXEC));
  return entry->stdin_info.get();
}

Status TargetCache::ReadCredentials(const Target& t, Credentials* c) {
  // One pread from offset 0 renders the file afresh. procfs renders it whole and gives all of it to
  // a read that has room, so a short read is the end: no second read to see EOF.
  char buf[8192];
  ssize_t n = 0;
  for (;;) {
    const size_t want = sizeof(buf) - 1 - size_t(n);
    const ssize_t got = pread(t.status, buf + n, want, n);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;
    n += got;
    if (size_t(got) < want || size_t(n) == sizeof(buf) - 1) break;
  }
  if (n <= 0) return Fail(kStageOpenProc, ESRCH);
  buf[n] = 0;
  if (!ParseProcStatus(buf, c)) return Fail(kStageCredentials, EIO);
  NamespaceLinkText userns;
  if (!ReadNamespaceLink(t.pid_dir, "ns/user", &userns)) return Fail(kStageOpenProc, ESRCH);
  c->init_userns = strcmp(userns.text, own_userns_.text) == 0;
  return {};
}

}  // namespace nshelper
