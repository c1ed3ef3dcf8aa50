#include "nshelper_recovery.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>

#include "monotonic_clock.h"

#ifndef STATX_MNT_ID_UNIQUE
#define STATX_MNT_ID_UNIQUE 0x00004000U
#endif

namespace nshelper {
namespace {

uint64_t Ns(const struct statx_timestamp& t) { return uint64_t(t.tv_sec) * 1000000000ull + t.tv_nsec; }

}  // namespace

uint64_t CoarseRealtimeNs() {
  return ClockNs(CLOCK_REALTIME_COARSE);
}

bool MadeSince(int dir, const char* name, uint64_t since_ns, uint64_t* dev, uint64_t* ino) {
  struct statx sx = {};
  if (statx(dir, name, AT_SYMLINK_NOFOLLOW, STATX_TYPE | STATX_INO | STATX_BTIME | STATX_CTIME, &sx) != 0) return false;
  if (!S_ISDIR(sx.stx_mode)) return false;
  const struct statx_timestamp& born = (sx.stx_mask & STATX_BTIME) ? sx.stx_btime : sx.stx_ctime;
  // A filesystem that keeps whole seconds only: the same second counts.
  const bool made = Ns(born) >= since_ns || (born.tv_nsec == 0 && uint64_t(born.tv_sec) == since_ns / 1000000000ull);
  if (!made) return false;
  *dev = makedev(sx.stx_dev_major, sx.stx_dev_minor);
  *ino = sx.stx_ino;
  return true;
}

uint64_t MountIdOf(int fd) {
  struct statx sx = {};
  if (statx(fd, "", AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW, STATX_MNT_ID_UNIQUE, &sx) != 0) return 0;
  return (sx.stx_mask & (STATX_MNT_ID_UNIQUE | STATX_MNT_ID)) ? sx.stx_mnt_id : 0;
}

}  // namespace nshelper
