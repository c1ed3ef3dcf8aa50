// The wire of a planned data plane handoff (seccomp-dataplane --takeover): a SOCK_SEQPACKET Unix
// socket beside the gRPC socket, only for the same user. The successor says hello; the serving data
// plane stops receiving and sends every fd a successor needs under its fd-store name (listener,
// journal, records, n<handle> notify fd, p<handle> policy) in frames of at most kMaxFdsPerFrame, then an
// end frame with a JSON summary; the successor adopts them, starts answering and acks; the old one
// then exits (the successor sees EOF). See docs/operators.md.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "handoff_formats.hpp"

namespace seccomp_agent {
namespace handoff {

struct NamedFd {
  int fd;
  std::string name;
};

constexpr size_t kMaxFdsPerFrame = 64;

// Serving side. A non-blocking, close-on-exec SEQPACKET listener at `path` (a stale socket file is
// replaced) with `mode`. -1 with *error.
int Listen(const std::string& path, unsigned mode, std::string* error);
// Serving side: the successor's hello within timeout_ms. False with *error, also when the
// successor does not read this data plane's frame and journal versions (handoff_formats.hpp): it
// is told why (a refusal frame) before anything is paused. *reads: what it reads.
bool ReadHello(int conn, int timeout_ms, FormatVersions* reads, std::string* error);
// Serving side. False with *error (the successor went away, or a send failed).
bool SendEntries(int conn, const std::vector<NamedFd>& entries, const std::string& summary, std::string* error);
// Serving side: the successor's ack within timeout_ms (it answers from now on). False with *error.
bool WaitAck(int conn, int timeout_ms, std::string* error);
// Serving side: tells the successor why not (best effort).
void SendRefusal(int conn, const std::string& reason);

// Successor side. A connected, close-on-exec socket; -1 with *error empty when nobody serves the
// path (no socket file, or refused: start fresh), -1 with *error set on any other failure.
int Connect(const std::string& path, std::string* error);
// The hello names the frame and journal versions this data plane reads.
bool SendHello(int conn, std::string* error);
// Everything up to the end frame (fds are close-on-exec and owned by the caller); a refusal or a
// malformed frame is an error (every fd received so far closed).
bool ReceiveEntries(int conn, int timeout_ms, std::vector<NamedFd>* entries, std::string* summary, std::string* error);
bool SendAck(int conn, std::string* error);
// True once the serving side closed the connection (it released its sockets and exits).
bool WaitClosed(int conn, int timeout_ms);

}  // namespace handoff
}  // namespace seccomp_agent
