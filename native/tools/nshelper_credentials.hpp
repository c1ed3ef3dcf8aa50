// Acting as the target (native/tools/nshelper.cpp): fsuid, fsgid, groups, umask, effective
// capabilities. The helper is single-threaded, so these per-thread credentials are the whole
// process's.
#pragma once
#include <stdint.h>

#include "nshelper_target.hpp"

namespace nshelper {

// The helper's own credentials between requests (fsuid and fsgid 0, no supplementary groups,
// every permitted capability effective, umask 022), set once at start: ActAs changes only what a
// target has otherwise and puts back only what it changed. Each change is a syscall, and on a VM
// with speculative-execution mitigations a dozen of them are a good part of a request.
bool TakeOwnCredentials();

class ActAs {
 public:
  // A target outside the host user namespace has its capabilities only over its own namespace;
  // the helper cannot express that, so it drops them all there (fails safe: EACCES, not access).
  Status Enter(const Credentials& c);
  ~ActAs() { Leave(); }
  // A helper that cannot get its own credentials back exits (70): it must not serve another request.
  void Leave();

 private:
  bool caps_ = false, fsuid_ = false, fsgid_ = false, groups_ = false, umask_ = false;
};

}  // namespace nshelper
