// What a request decides from an intent a dead helper left in the replay book (docs/emulation.md,
// "Exactly once"): the helper notes an intent before it acts and marks it acted right after, so a
// fresh helper given the same request finds an intent alone only when its predecessor died between
// the act and the mark, or before the act. These are the two facts that tell which.
#pragma once
#include <stdint.h>

namespace nshelper {

// CLOCK_REALTIME_COARSE in ns: the clock a new inode's times come from (the kernel's current_time
// is the coarse clock or later), read through the vDSO (no syscall on the mkdir path).
uint64_t CoarseRealtimeNs();

// mkdir, intent only: whether `name` in `dir` is a directory born at or after `since_ns` (an
// intent's CoarseRealtimeNs), so the dead helper's own; then *dev and *ino say which. Birth time
// (statx STATX_BTIME); a filesystem without one: its change time, which is as late or later.
bool MadeSince(int dir, const char* name, uint64_t since_ns, uint64_t* dev, uint64_t* ino);

// mount: the id of the mount `fd` (a freshly resolved target) is on: STATX_MNT_ID_UNIQUE (6.8),
// else STATX_MNT_ID; 0 unknown. A mount attached on the target since gives another id.
uint64_t MountIdOf(int fd);

}  // namespace nshelper
