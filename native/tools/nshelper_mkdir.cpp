// mkdir for the helper: resolve the parent as the target, check it still waits, make the directory once.
#include "nshelper_mkdir.hpp"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>

#include "monotonic_clock.h"
#include "nshelper_credentials.hpp"
#include "nshelper_recovery.hpp"
#include "nshelper_resolve.hpp"
#include "nshelper_state.hpp"
#include "unique_fd.h"

namespace nshelper {

Status DoMkdir(const Request& req, const std::string& path, const Target& t, Outcome* out) {
  Credentials cred;
  Status s = g_targets.ReadCredentials(t, &cred);
  if (!s.ok()) return s;
  out->wait_state = cred.state;
  std::string full, parent, last;
  Fd base;  // a relative path's cwd or dirfd
  s = PathFromRoot(t, req.dirfd, path, &full, &base);
  if (!s.ok()) return s;
  if (!SplitLast(full, &parent, &last)) return Fail(nshelper::kStageDone, EEXIST);

  nshelper::ActAs as;
  s = as.Enter(cred);
  if (!s.ok()) return s;
  Fd& dir = out->parent;
  if (base.get() >= 0) {
    dir.Reset(OpenParentBeneath(base.get(), path));
    if (dir.get() < 0 && errno != ELOOP && errno != EXDEV) return Fail(nshelper::kStageResolve, errno);
  }
  if (dir.get() < 0) dir.Reset(OpenInRoot(t, parent, O_DIRECTORY));
  if (dir.get() < 0) return Fail(nshelper::kStageResolve, errno);
  // Last check before acting: the target may have been interrupted while we resolved.
  if (!t.StillPending()) return Fail(nshelper::kStageStale, ENOENT);
  // "." and ".." name a directory that exists (its parent just resolved): the kernel says EEXIST
  // and creates nothing, whatever path a control plane sent.
  if (last == "." || last == "..") return Fail(nshelper::kStageDone, EEXIST);
  // A call a signal restarted (or a request whose helper died after its mkdir), whose directory
  // an earlier request made and is still there: that outcome again, nothing done.
  const bool recovering = TakeIntent(out);
  if (out->candidate.index >= 0 && !recovering) {
    const replay_book::Entry& e = out->candidate.entry;
    struct stat st;
    if (fstatat(dir.get(), last.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode) &&
        uint64_t(st.st_dev) == e.made.dev && uint64_t(st.st_ino) == e.made.ino) {
      out->entry = out->candidate.index;
      out->replay = true;
      return {};
    }
    g_replays.Erase(out->candidate.index);  // removed or replaced since: this call is new
  }
  if (!recovering) {
    out->entry = g_replays.Intend(req, out->strings_hash, out->task_ino, nshelper::CoarseRealtimeNs(), 0, MonotonicNs());
  }
  uint64_t dev = 0, ino = 0;
  if (mkdirat(dir.get(), last.c_str(), mode_t(req.mode)) != 0) {
    const int err = errno;
    // A dead helper's intent alone: it died after its mkdirat, before marking it. A directory at
    // that name born since its intent is the one it made (docs/emulation.md, "Exactly once").
    if (!(err == EEXIST && recovering &&
          nshelper::MadeSince(dir.get(), last.c_str(), out->candidate.entry.intent.realtime_ns, &dev, &ino))) {
      return Fail(nshelper::kStageDone, err);
    }
    out->replay = true;
  } else if (out->entry >= 0) {
    struct stat st;
    if (fstatat(dir.get(), last.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) {
      dev = uint64_t(st.st_dev);
      ino = uint64_t(st.st_ino);
    }
  }
  if (ino != 0) g_replays.Acted(out->entry, dev, ino);
  return {};
}

}  // namespace nshelper
