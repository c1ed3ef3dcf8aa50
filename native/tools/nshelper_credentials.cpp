// Acting as the target and back (nshelper_credentials.hpp).
#include "nshelper_credentials.hpp"

#include <errno.h>
#include <grp.h>
#include <linux/capability.h>
#include <sys/fsuid.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace nshelper {
namespace {

// The helper's capability sets as it started. Its permitted and inheritable sets never change
// (fsuid and the effective set are all it moves), so each change of the effective set is one
// capset from this copy, with no capget first.
__user_cap_data_struct g_own_caps[2] = {};
uint64_t g_own_permitted = 0;

bool SetEffectiveCaps(uint64_t wanted) {
  __user_cap_header_struct hdr = {_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2] = {g_own_caps[0], g_own_caps[1]};
  const uint64_t eff = wanted & g_own_permitted;
  data[0].effective = uint32_t(eff);
  data[1].effective = uint32_t(eff >> 32);
  return syscall(SYS_capset, &hdr, data) == 0;
}

}  // namespace

bool TakeOwnCredentials() {
  __user_cap_header_struct hdr = {_LINUX_CAPABILITY_VERSION_3, 0};
  if (setgroups(0, nullptr) != 0 || syscall(SYS_capget, &hdr, g_own_caps) != 0) return false;
  g_own_permitted = uint64_t(g_own_caps[0].permitted) | (uint64_t(g_own_caps[1].permitted) << 32);
  setfsuid(0);
  setfsgid(0);
  umask(022);
  return uid_t(setfsuid(uid_t(-1))) == 0 && gid_t(setfsgid(gid_t(-1))) == 0 && SetEffectiveCaps(~0ull);
}

Status ActAs::Enter(const Credentials& c) {
  if (!c.groups.empty()) {
    groups_ = true;
    if (setgroups(c.groups.size(), c.groups.data()) != 0) return Fail(kStageCredentials, errno);
  }
  if (c.fsgid != 0) {
    fsgid_ = true;
    setfsgid(c.fsgid);
    if (gid_t(setfsgid(gid_t(-1))) != c.fsgid) return Fail(kStageCredentials, EPERM);
  }
  if (c.fsuid != 0) {
    fsuid_ = true;
    setfsuid(c.fsuid);
    if (uid_t(setfsuid(uid_t(-1))) != c.fsuid) return Fail(kStageCredentials, EPERM);
  }
  // A non-zero fsuid also took the file capabilities out of the effective set: set them then.
  const uint64_t wanted = (c.init_userns ? c.cap_eff : 0) & g_own_permitted;
  if (fsuid_ || wanted != g_own_permitted) {
    caps_ = true;
    if (!SetEffectiveCaps(wanted)) return Fail(kStageCredentials, errno);
  }
  if (c.umask != 022) {
    umask_ = true;
    umask(c.umask);
  }
  return {};
}

void ActAs::Leave() {
  // Capabilities first: setfsuid/setgroups below need CAP_SETUID/CAP_SETGID back.
  if (caps_ && !SetEffectiveCaps(~0ull)) _exit(70);
  if (fsuid_) {
    setfsuid(0);
    if (setfsuid(uid_t(-1)) != 0) _exit(70);
  }
  if (fsgid_) {
    setfsgid(0);
    if (setfsgid(gid_t(-1)) != 0) _exit(70);
  }
  if (groups_ && setgroups(0, nullptr) != 0) _exit(70);
  if (umask_) umask(022);
  caps_ = fsuid_ = fsgid_ = groups_ = umask_ = false;
}

}  // namespace nshelper
