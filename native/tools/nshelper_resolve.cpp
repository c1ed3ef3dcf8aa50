// Path resolution for the helper: from the target's root and cwd, never above its root.
#include "nshelper_resolve.hpp"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "nshelper_state.hpp"

namespace nshelper {
namespace {

// The directory a relative path starts from, as a path from the target's root: its cwd, or the
// directory its fd `dirfd` refers to (mkdirat). Computed with getcwd() after chroot to the
// target's root, which the kernel marks "(unreachable)" when the directory lies outside it.
// `base` keeps the directory itself (O_PATH), the one seen inside the root.
Status BaseFromRoot(const Target& t, int dirfd, std::string* out, Fd* base_out) {
  Fd& base = *base_out;
  if (dirfd == AT_FDCWD) {
    base.Reset(openat(t.pid_dir, "cwd", O_PATH | O_DIRECTORY | O_CLOEXEC));
    if (base.get() < 0) return Fail(nshelper::kStageOpenProc, ESRCH);
  } else {
    if (dirfd < 0) return Fail(nshelper::kStageResolve, EBADF);
    char name[32];
    snprintf(name, sizeof(name), "fd/%d", dirfd);
    base.Reset(openat(t.pid_dir, name, O_PATH | O_CLOEXEC));
    if (base.get() < 0) return Fail(nshelper::kStageResolve, errno == ENOENT ? EBADF : errno);
    struct stat st;
    if (fstat(base.get(), &st) != 0) return Fail(nshelper::kStageResolve, errno);
    if (!S_ISDIR(st.st_mode)) return Fail(nshelper::kStageResolve, ENOTDIR);
  }
  char buf[PATH_MAX + 1];
  long n = -1;
  int err = 0;
  bool entered = fchdir(t.root.get()) == 0 && chroot(".") == 0 && fchdir(base.get()) == 0;
  if (entered) n = syscall(SYS_getcwd, buf, sizeof(buf));
  err = errno;
  // Back to the host root at once: a root or cwd left inside the container would keep its
  // mounts busy after it is gone.
  if (fchdir(g_host_root) != 0 || chroot(".") != 0) _exit(70);
  if (!entered) return Fail(nshelper::kStageInternal, err);
  if (n < 0) return Fail(nshelper::kStageResolve, err);  // ENOENT: the directory was removed
  if (buf[0] != '/') return Fail(nshelper::kStageOutsideRoot, EPERM);
  out->assign(buf);
  return {};
}

}  // namespace

// The path as seen from the target's root: absolute paths as they are, relative ones appended to
// the base directory (kept in `base`, for OpenParentBeneath). A ".." that climbs above the root is
// clamped there by RESOLVE_IN_ROOT.
Status PathFromRoot(const Target& t, int dirfd, const std::string& path, std::string* out, Fd* base) {
  if (path.empty()) return Fail(nshelper::kStageResolve, ENOENT);
  if (path[0] == '/') {
    *out = path;
    return {};
  }
  Status s = BaseFromRoot(t, dirfd, out, base);
  if (!s.ok()) return s;
  out->push_back('/');
  out->append(path);
  if (out->size() > PATH_MAX) return Fail(nshelper::kStageResolve, ENAMETOOLONG);
  return {};
}

// openat2 relative to the target's root: symlinks (absolute ones too) and ".." stay inside it,
// /proc magic links (/proc/1/root, /proc/self/cwd...) are refused with ELOOP.
int OpenInRoot(const Target& t, const std::string& path, uint64_t flags) {
  open_how how = {};
  how.flags = flags | O_PATH | O_CLOEXEC;
  how.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS;
  for (int attempt = 0;; ++attempt) {
    long fd = syscall(SYS_openat2, t.root.get(), path.c_str(), &how, sizeof(how));
    if (fd >= 0) return int(fd);
    // EAGAIN: a rename raced with a ".." step; the kernel asks to retry.
    if (errno != EAGAIN || attempt == 16) return -1;
  }
}

// Splits an absolute path into its parent directory and last component (trailing slashes
// dropped). Returns false for "/" and the like (mkdir says EEXIST there).
bool SplitLast(const std::string& full, std::string* parent, std::string* last) {
  size_t end = full.find_last_not_of('/');
  if (end == std::string::npos) return false;
  size_t slash = full.rfind('/', end);
  *last = full.substr(slash + 1, end - slash);
  *parent = slash == 0 ? "/" : full.substr(0, slash);
  return true;
}

// The parent of a relative path, walked from its base directory (the thread's cwd, or its dirfd) as
// the kernel walks it: the folders above the base are never searched. Walked from the root instead,
// a thread whose cwd lies below a folder it may not search (a 0700 parent; its fsuid not the owner)
// got EACCES where the kernel lets it make the directory. RESOLVE_BENEATH keeps the walk below the
// base (which BaseFromRoot saw inside the root); a walk that meets a symlink or climbs above the
// base with ".." fails (ELOOP, EXDEV) and is left to OpenInRoot from the root, as before.
int OpenParentBeneath(int base, const std::string& relative) {
  std::string parent, last;
  if (!SplitLast("/" + relative, &parent, &last)) {
    errno = EEXIST;
    return -1;
  }
  open_how how = {};
  how.flags = O_PATH | O_DIRECTORY | O_CLOEXEC;
  how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
  const std::string from_base = parent == "/" ? "." : parent.substr(1);
  for (int attempt = 0;; ++attempt) {
    long fd = syscall(SYS_openat2, base, from_base.c_str(), &how, sizeof(how));
    if (fd >= 0) return int(fd);
    if (errno != EAGAIN || attempt == 16) return -1;
  }
}

}  // namespace nshelper
