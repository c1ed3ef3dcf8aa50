// What one request did beyond its status (the replay book's entries, the target's wait), shared
// by the mkdir and mount jobs that fill it and the request loop that answers with it.
#pragma once
#include <stdint.h>

#include "nshelper_replay.hpp"
#include "replay_book.h"
#include "unique_fd.h"

namespace nshelper {

// What one request did, beyond its status: for the replay book and the response's flags.
struct Outcome {
  nshelper::Candidate candidate;  // the book's entry this request may restart (Handle found it)
  int entry = -1;                 // its own entry: intent, then acted, settled after the answer
  bool replay = false;            // `entry` is an earlier request's outcome, given again: nothing done
  uint64_t strings_hash = 0;
  uint64_t task_ino = 0;          // the target's pidfs inode (0: not known, no replay)
  char wait_state = 0;            // Credentials::state
  int stdin_info = -1;            // the target's fdinfo/0 and pidfd (the cache's): AnswerZero's
  int pidfd = -1;
  Fd parent;                      // the directory acted in: closed after the answer, off the target's path
};

// The candidate is a dead helper's intent: its act may or may not have happened (the pool gave
// its request to this helper, or the call came back), and this request goes on from that entry.
inline bool TakeIntent(Outcome* out) {
  if (out->candidate.index < 0 || out->candidate.entry.state != replay_book::kIntent) return false;
  out->entry = out->candidate.index;
  return true;
}

}  // namespace nshelper
