// The pool's end of a helper's requests (nshelper_protocol.h): one SOCK_SEQPACKET message each,
// the header, its strings and the notify fd (SCM_RIGHTS). Responses come back through the reply
// ring (nshelper_replies.hpp).
#pragma once
#include <stdint.h>

#include "nshelper_pool.hpp"

namespace seccomp_agent {

// Sends one request on a helper's socket, without blocking. False with errno set when it did not
// go (EAGAIN: the socket is full; EPIPE: the helper exited).
bool SendNsHelperRequest(int sock, const NsHelperJob& job, uint64_t tag);

}  // namespace seccomp_agent
