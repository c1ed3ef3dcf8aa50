// The systemd file descriptor store protocol, both halves, without libsystemd: a process sends
// "KEY=VALUE" lines in one datagram to $NOTIFY_SOCKET with fds as SCM_RIGHTS (FDSTORE=1 keeps
// them, FDSTOREREMOVE=1 drops them); whoever holds them (systemd, or seccomp-keeper in a pod)
// passes them back to the next run as fds 3.. with LISTEN_PID/LISTEN_FDS/LISTEN_FDNAMES.
// Header-only so the addon and the keeper share one implementation. No exceptions.
#pragma once

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include <memory>

#include "scm_rights.h"
#include <string>
#include <vector>

namespace seccomp_agent {
namespace fd_store {

// The kernel's SCM_MAX_FD: more fds than this in one datagram fail with EINVAL.
constexpr size_t kMaxFdsPerMessage = scm_rights::kMaxFds;
constexpr size_t kMaxNameLength = 255;
// systemd reads at most PIPE_BUF bytes of a notification; longer ones are refused whole.
constexpr size_t kMaxMessageBytes = 4096;

// systemd accepts any printable ASCII but ':' (the LISTEN_FDNAMES separator); a narrower set keeps
// names safe in logs and environment variables.
inline bool IsValidName(const std::string& name) {
  if (name.empty() || name.size() > kMaxNameLength) return false;
  for (char c : name) {
    bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
              c == '-';
    if (!ok) return false;
  }
  return true;
}

inline std::string ErrnoText(const char* what, int err) { return std::string(what) + ": " + strerror(err); }

// Fills *addr from "/path" or "@abstract" (leading NUL); false with *error otherwise.
inline bool ParseUnixAddress(const std::string& address, sockaddr_un* addr, socklen_t* length, std::string* error) {
  memset(addr, 0, sizeof(*addr));
  addr->sun_family = AF_UNIX;
  if (address.size() < 2 || (address[0] != '/' && address[0] != '@')) {
    *error = "NOTIFY_SOCKET \"" + address + "\" is neither an absolute path nor an @abstract name";
    return false;
  }
  if (address.find('\0') != std::string::npos) {
    *error = "NOTIFY_SOCKET contains a NUL byte";
    return false;
  }
  bool abstract = address[0] == '@';
  // A path needs its terminating NUL inside sun_path; an abstract name is counted by length only.
  size_t limit = abstract ? sizeof(addr->sun_path) : sizeof(addr->sun_path) - 1;
  if (address.size() > limit) {
    *error = "NOTIFY_SOCKET \"" + address + "\" is longer than a unix socket address";
    return false;
  }
  memcpy(addr->sun_path, address.data(), address.size());
  if (abstract) addr->sun_path[0] = '\0';
  *length = socklen_t(offsetof(sockaddr_un, sun_path) + address.size() + (abstract ? 0 : 1));
  return true;
}

// Client side of the sd_notify protocol: one datagram per message, fds as SCM_RIGHTS.
class Notifier {
 public:
  // Reads $NOTIFY_SOCKET (a path, or '@name' for the abstract namespace). Returns nullptr and
  // leaves *error empty when the variable is unset; nullptr with *error set when it is unusable.
  static std::unique_ptr<Notifier> FromEnvironment(std::string* error) {
    error->clear();
    const char* value = getenv("NOTIFY_SOCKET");
    if (value == nullptr || value[0] == '\0') return nullptr;  // systemd treats empty as unset
    std::unique_ptr<Notifier> notifier(new Notifier());
    notifier->address_ = value;
    if (!ParseUnixAddress(notifier->address_, &notifier->addr_, &notifier->addr_length_, error)) return nullptr;
    notifier->fd_ = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (notifier->fd_ < 0) {
      *error = ErrnoText("socket(AF_UNIX, SOCK_DGRAM) for NOTIFY_SOCKET", errno);
      return nullptr;
    }
    // A receiver that stopped reading must not freeze the caller forever: after this long the
    // send fails (EAGAIN) and the caller hears about it.
    timeval timeout = {5, 0};
    if (setsockopt(notifier->fd_, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof(timeout)) != 0) {
      *error = ErrnoText("setsockopt(SO_SNDTIMEO) on the NOTIFY_SOCKET socket", errno);
      return nullptr;
    }
    return notifier;
  }

  ~Notifier() {
    if (fd_ >= 0) close(fd_);
  }
  Notifier(const Notifier&) = delete;
  Notifier& operator=(const Notifier&) = delete;

  const std::string& address() const { return address_; }

  // One datagram: `message` ("KEY=VALUE\n..." lines) and `count` fds (count <= 253). False with *error.
  bool Send(const std::string& message, const int* fds, size_t count, std::string* error) {
    if (message.empty()) {
      *error = "a notification needs at least one KEY=VALUE line";
      return false;
    }
    if (count > kMaxFdsPerMessage) {
      *error = "at most " + std::to_string(kMaxFdsPerMessage) + " fds fit in one notification, got " +
               std::to_string(count);
      return false;
    }
    iovec iov;
    iov.iov_base = const_cast<char*>(message.data());
    iov.iov_len = message.size();
    ssize_t sent = scm_rights::Send(fd_, &iov, 1, fds, count, MSG_NOSIGNAL, &addr_, addr_length_);
    if (sent < 0) {
      *error = ErrnoText(("sendmsg to NOTIFY_SOCKET " + address_).c_str(), errno);
      return false;
    }
    if (size_t(sent) != message.size()) {
      *error = "sendmsg to NOTIFY_SOCKET " + address_ + " sent " + std::to_string(sent) + " of " +
               std::to_string(message.size()) + " bytes";
      return false;
    }
    return true;
  }

  // "FDSTORE=1\nFDNAME=<name>" with the fds (name: 1..255 chars of [A-Za-z0-9_.-], checked).
  bool Store(const std::string& name, const int* fds, size_t count, std::string* error) {
    if (!IsValidName(name)) {
      *error = "fd store name \"" + name + "\" must be 1 to 255 characters of A-Z a-z 0-9 _ . -";
      return false;
    }
    if (count == 0) {
      *error = "FDSTORE=1 needs at least one fd";
      return false;
    }
    return Send("FDSTORE=1\nFDNAME=" + name, fds, count, error);
  }

  // "FDSTOREREMOVE=1\nFDNAME=<name>".
  bool Remove(const std::string& name, std::string* error) {
    if (!IsValidName(name)) {
      *error = "fd store name \"" + name + "\" must be 1 to 255 characters of A-Z a-z 0-9 _ . -";
      return false;
    }
    return Send("FDSTOREREMOVE=1\nFDNAME=" + name, nullptr, 0, error);
  }

 private:
  Notifier() = default;
  std::string address_;
  sockaddr_un addr_;
  socklen_t addr_length_ = 0;
  int fd_ = -1;
};

struct ListenedFd {
  int fd;
  std::string name;
};

// SD_LISTEN_FDS_START: the first passed fd.
constexpr int kListenFdsStart = 3;

inline bool ParseDecimal(const char* text, long long max, long long* out) {
  if (text == nullptr || text[0] < '0' || text[0] > '9') return false;
  errno = 0;
  char* end = nullptr;
  long long v = strtoll(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0' || v < 0 || v > max) return false;
  *out = v;
  return true;
}

// Takes what systemd (or the keeper) passed: LISTEN_PID must equal getpid(), LISTEN_FDS fds from
// 3, names from LISTEN_FDNAMES (colon-separated; "unknown" when missing). Sets FD_CLOEXEC on them
// and unsets the three variables. Empty vector (no error) when nothing was passed or LISTEN_PID is another pid.
// A passed fd that is not open is left out with *error set; the others are still returned.
inline std::vector<ListenedFd> TakeListenFds(std::string* error) {
  error->clear();
  std::vector<ListenedFd> taken;
  const char* pid_text = getenv("LISTEN_PID");
  const char* fds_text = getenv("LISTEN_FDS");
  std::string names_text = getenv("LISTEN_FDNAMES") != nullptr ? getenv("LISTEN_FDNAMES") : "";
  long long pid = 0, count = 0;
  bool ours = pid_text != nullptr && fds_text != nullptr;
  if (ours && !ParseDecimal(pid_text, INT_MAX, &pid)) {
    *error = std::string("LISTEN_PID \"") + pid_text + "\" is not a pid";
    ours = false;
  }
  // Variables meant for another process (our parent, say) are dropped too, as sd_listen_fds does,
  // so they do not reach our own children.
  if (ours && pid != getpid()) ours = false;
  if (ours && !ParseDecimal(fds_text, INT_MAX - kListenFdsStart, &count)) {
    *error = std::string("LISTEN_FDS \"") + fds_text + "\" is not a count";
    ours = false;
  }
  unsetenv("LISTEN_PID");
  unsetenv("LISTEN_FDS");
  unsetenv("LISTEN_FDNAMES");
  if (!ours) return taken;

  std::vector<std::string> names;
  size_t start = 0;
  while (!names_text.empty() && start <= names_text.size()) {
    size_t colon = names_text.find(':', start);
    if (colon == std::string::npos) colon = names_text.size();
    names.push_back(names_text.substr(start, colon - start));
    start = colon + 1;
  }
  for (long long i = 0; i < count; i++) {
    int fd = int(kListenFdsStart + i);
    int flags = fcntl(fd, F_GETFD);
    if (flags < 0 || fcntl(fd, F_SETFD, flags | FD_CLOEXEC) < 0) {
      // Keep going: the others are still ours to use (and to close).
      if (error->empty()) *error = ErrnoText(("LISTEN_FDS: fd " + std::to_string(fd)).c_str(), errno);
      continue;
    }
    std::string name = size_t(i) < names.size() && !names[size_t(i)].empty() ? names[size_t(i)] : "unknown";
    taken.push_back(ListenedFd{fd, name});
  }
  return taken;
}

}  // namespace fd_store
}  // namespace seccomp_agent
