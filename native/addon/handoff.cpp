#include "handoff.hpp"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "handoff_formats.hpp"
#include "journal.hpp"
#include "monotonic_clock.h"
#include "scm_rights.h"
#include "unix_socket.h"

namespace seccomp_agent {
namespace handoff {
namespace {

constexpr uint32_t kMagic = 0x4f484353;  // "SCHO"
constexpr uint16_t kVersion = kFrameVersion;
enum FrameType : uint16_t { kHello = 1, kEntries = 2, kEnd = 3, kAck = 4, kRefuse = 5 };
constexpr size_t kMaxText = 60 * 1024;
// Fd table slots a successor reserves before a handoff: 2 per container (notify fd, record) for
// 8,192 containers, as the fd stores are sized (deploy/).
constexpr int kReservedFds = 16384 + 64;

struct FrameHeader {
  uint32_t magic;
  uint16_t version;
  uint16_t type;
  uint32_t fd_count;
  uint32_t text_length;
};

std::string ErrnoText(const char* what) { return std::string(what) + ": " + strerror(errno); }

// Waits for `events` on fd until deadline_ms (CLOCK_MONOTONIC ms). False with *error on timeout.
bool WaitFor(int fd, short events, uint64_t deadline_ms, const char* what, std::string* error) {
  for (;;) {
    uint64_t now = MonotonicMs();
    if (now >= deadline_ms) {
      *error = std::string("timed out waiting for ") + what;
      return false;
    }
    struct pollfd p = {fd, events, 0};
    int n = poll(&p, 1, static_cast<int>(deadline_ms - now));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      *error = ErrnoText("poll");
      return false;
    }
    if (n > 0) return true;
  }
}

bool SendFrame(int conn, FrameType type, const std::string& text, const int* fds, size_t fd_count, std::string* error) {
  if (text.size() > kMaxText || fd_count > kMaxFdsPerFrame) {
    *error = "handoff frame too large";
    return false;
  }
  FrameHeader header = {kMagic, kVersion, type, static_cast<uint32_t>(fd_count), static_cast<uint32_t>(text.size())};
  struct iovec iov[2];
  iov[0].iov_base = &header;
  iov[0].iov_len = sizeof header;
  iov[1].iov_base = const_cast<char*>(text.data());
  iov[1].iov_len = text.size();
  for (;;) {
    if (scm_rights::Send(conn, iov, text.empty() ? 1 : 2, fds, fd_count, MSG_NOSIGNAL) >= 0) return true;
    if (errno == EAGAIN) {
      if (!WaitFor(conn, POLLOUT, MonotonicMs() + 5000, "room on the handoff socket", error)) return false;
      continue;
    }
    *error = ErrnoText("sendmsg on the handoff socket");
    return false;
  }
}

void CloseAll(std::vector<NamedFd>* fds) {
  for (const NamedFd& f : *fds) close(f.fd);
  fds->clear();
}

// One frame (fds appended to *fds, close-on-exec). False with *error; a clean EOF says "closed".
bool ReceiveFrame(int conn, uint64_t deadline_ms, FrameHeader* header, std::string* text, std::vector<int>* fds,
                  std::string* error) {
  if (!WaitFor(conn, POLLIN, deadline_ms, "the other data plane", error)) return false;
  static thread_local char buffer[sizeof(FrameHeader) + kMaxText];
  struct iovec iov = {buffer, sizeof buffer};
  const size_t before = fds->size();
  bool truncated = false;
  ssize_t n = scm_rights::Receive(conn, &iov, 1, 0, fds, &truncated);
  if (n < 0) {
    *error = ErrnoText("recvmsg on the handoff socket");
    return false;
  }
  if (n == 0) {
    *error = "closed";
    return false;
  }
  if (truncated || static_cast<size_t>(n) < sizeof(FrameHeader)) {
    *error = "a truncated handoff frame";
    return false;
  }
  memcpy(header, buffer, sizeof *header);
  if (header->magic != kMagic || header->version != kVersion ||
      header->text_length != static_cast<size_t>(n) - sizeof(FrameHeader) ||
      header->fd_count != fds->size() - before) {
    *error = "a malformed handoff frame (other version?)";
    return false;
  }
  text->assign(buffer + sizeof(FrameHeader), header->text_length);
  return true;
}

bool ExpectFrame(int conn, FrameType want, int timeout_ms, const char* what, std::string* error, std::string* text_out = nullptr) {
  FrameHeader header;
  std::string text;
  std::vector<int> fds;
  bool ok = ReceiveFrame(conn, MonotonicMs() + static_cast<uint64_t>(timeout_ms), &header, &text, &fds, error);
  for (int fd : fds) close(fd);  // none expected
  if (!ok) {
    *error = std::string("no ") + what + ": " + *error;
    return false;
  }
  if (header.type != want || !fds.empty()) {
    *error = std::string("expected ") + what + ", got frame type " + std::to_string(header.type);
    return false;
  }
  if (text_out != nullptr) *text_out = text;
  return true;
}

}  // namespace

int Listen(const std::string& path, unsigned mode, std::string* error) {
  return ListenUnixSocket(path, mode, "handoff socket", error, SOCK_SEQPACKET);
}

bool ReadHello(int conn, int timeout_ms, FormatVersions* reads, std::string* error) {
  std::string text;
  if (!ExpectFrame(conn, kHello, timeout_ms, "hello from the successor", error, &text)) return false;
  if (!ParseHelloReads(text, reads, error)) return false;
  const std::string why = FormatMismatch(*reads, kVersion, InFlightJournal::kFormatVersion);
  if (!why.empty()) {
    *error = "the successor cannot read what this data plane hands over (" + why +
             "): refused before pausing anything; roll out a release that reads these formats, or node by node "
             "(docs/upgrades.md)";
    SendRefusal(conn, *error);
    return false;
  }
  return true;
}

bool SendEntries(int conn, const std::vector<NamedFd>& entries, const std::string& summary, std::string* error) {
  for (size_t start = 0; start < entries.size(); start += kMaxFdsPerFrame) {
    size_t count = std::min(kMaxFdsPerFrame, entries.size() - start);
    std::string names;
    int fds[kMaxFdsPerFrame];
    for (size_t i = 0; i < count; i++) {
      if (i > 0) names += '\n';
      names += entries[start + i].name;
      fds[i] = entries[start + i].fd;
    }
    if (!SendFrame(conn, kEntries, names, fds, count, error)) return false;
  }
  return SendFrame(conn, kEnd, summary, nullptr, 0, error);
}

bool WaitAck(int conn, int timeout_ms, std::string* error) {
  return ExpectFrame(conn, kAck, timeout_ms, "ack from the successor", error);
}

void SendRefusal(int conn, const std::string& reason) {
  std::string ignored;
  SendFrame(conn, kRefuse, reason.substr(0, kMaxText), nullptr, 0, &ignored);
}

// Growing the fd table of a multi-threaded process waits for an RCU grace period each time
// (expand_fdtable), milliseconds on a VM: receiving 2,000 fds grows it five times, inside the pause.
// Grown once here, before anything is paused (the table never shrinks).
void ReserveFdTable(int fd) {
  struct rlimit limit;
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return;
  rlim_t want = kReservedFds;
  if (limit.rlim_cur != RLIM_INFINITY && want > limit.rlim_cur - 1) want = limit.rlim_cur - 1;
  int high = fcntl(fd, F_DUPFD_CLOEXEC, static_cast<int>(want));
  if (high >= 0) close(high);
}

int Connect(const std::string& path, std::string* error) {
  error->clear();
  struct sockaddr_un addr;
  memset(&addr, 0, sizeof addr);
  addr.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof addr.sun_path) {
    *error = "handoff socket path \"" + path + "\" is empty or too long";
    return -1;
  }
  memcpy(addr.sun_path, path.data(), path.size());
  int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    *error = ErrnoText("socket(AF_UNIX, SOCK_SEQPACKET)");
    return -1;
  }
  if (connect(fd, reinterpret_cast<struct sockaddr*>(&addr), sizeof addr) != 0) {
    int err = errno;
    close(fd);
    if (err != ENOENT && err != ECONNREFUSED) *error = "connect " + path + ": " + strerror(err);
    return -1;
  }
  ReserveFdTable(fd);
  return fd;
}

bool SendHello(int conn, std::string* error) {
  const FormatVersions reads{{kVersion}, {InFlightJournal::kFormatVersion}, {kRecordsVersion}};
  return SendFrame(conn, kHello, HelloText(getpid(), reads), nullptr, 0, error);
}

bool ReceiveEntries(int conn, int timeout_ms, std::vector<NamedFd>* entries, std::string* summary, std::string* error) {
  const uint64_t deadline = MonotonicMs() + static_cast<uint64_t>(timeout_ms);
  for (;;) {
    FrameHeader header;
    std::string text;
    std::vector<int> fds;
    if (!ReceiveFrame(conn, deadline, &header, &text, &fds, error)) {
      for (int fd : fds) close(fd);
      CloseAll(entries);
      if (*error == "closed") *error = "the serving data plane closed the handoff before its end";
      return false;
    }
    if (header.type == kEnd && fds.empty()) {
      *summary = text;
      return true;
    }
    if (header.type != kEntries) {
      for (int fd : fds) close(fd);
      CloseAll(entries);
      *error = header.type == kRefuse ? "the serving data plane refused: " + text
                                      : "unexpected handoff frame type " + std::to_string(header.type);
      return false;
    }
    size_t start = 0;
    for (size_t i = 0; i < fds.size(); i++) {
      size_t end = text.find('\n', start);
      if (end == std::string::npos) end = text.size();
      entries->push_back(NamedFd{fds[i], text.substr(start, end - start)});
      start = end + 1;
    }
  }
}

bool SendAck(int conn, std::string* error) { return SendFrame(conn, kAck, "", nullptr, 0, error); }

bool WaitClosed(int conn, int timeout_ms) {
  const uint64_t deadline = MonotonicMs() + static_cast<uint64_t>(timeout_ms);
  for (;;) {
    std::string error;
    if (!WaitFor(conn, POLLIN, deadline, "the end", &error)) return false;
    char byte[sizeof(FrameHeader) + 16];
    ssize_t n = recv(conn, byte, sizeof byte, 0);
    if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN)) return true;
  }
}

}  // namespace handoff
}  // namespace seccomp_agent
