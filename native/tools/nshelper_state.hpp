// The helper's process-wide state, one of each (it serves one request at a time), shared by its
// jobs (resolution, mkdir, mount, the request loop); defined in nshelper.cpp.
#pragma once
#include "nshelper_replay.hpp"
#include "nshelper_target.hpp"

namespace nshelper {

extern TargetCache g_targets;  // the host's /proc and the tasks seen lately
extern ReplayBook g_replays;   // outcomes kept for calls a signal restarts (nshelper_replay.hpp)
extern int g_host_root;        // the helper's own root, taken back after each chroot

}  // namespace nshelper
