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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include <memory>

#include "command_line.h"  // ParseDecimal
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

// The keeper's socket lives in a directory only root can enter, so nobody else can bind its name,
// before or after the keeper dies (an abstract name has no permissions and is free for anyone the
// moment its owner is gone). Default of seccomp-keeper --socket-dir.
constexpr const char* kKeeperSocketDir = "/run/seccomp-keeper";
constexpr const char* kKeeperSocketPrefix = "seccomp-keeper-";

// Whether `st` (an lstat) is a root-owned directory nobody else may enter or write.
inline bool CheckPrivateDirectory(const std::string& dir, const struct stat& st, std::string* error) {
  if (S_ISLNK(st.st_mode)) {
    *error = "the fd store directory " + dir + " is a symlink; refusing it";
    return false;
  }
  if (!S_ISDIR(st.st_mode)) {
    *error = "the fd store directory " + dir + " is not a directory; refusing it";
    return false;
  }
  if (st.st_uid != 0) {
    *error = "the fd store directory " + dir + " is owned by uid " + std::to_string(st.st_uid) + ", not root; refusing it";
    return false;
  }
  if ((st.st_mode & 022) != 0) {
    char mode[8];
    snprintf(mode, sizeof(mode), "%04o", unsigned(st.st_mode & 07777));
    *error = "the fd store directory " + dir + " has mode " + mode + ": group or others may write it; refusing it";
    return false;
  }
  return true;
}

// Keeper side: creates `dir` (0700) when missing, refuses a symlink, a directory not owned by root or
// one that group or others may write, and takes any other access away (0700). Returns false with *error.
inline bool EnsurePrivateDirectory(const std::string& dir, std::string* error) {
  if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    *error = ErrnoText(("mkdir " + dir).c_str(), errno);
    return false;
  }
  struct stat st;
  if (lstat(dir.c_str(), &st) != 0) {
    *error = ErrnoText(("lstat " + dir).c_str(), errno);
    return false;
  }
  if (!CheckPrivateDirectory(dir, st, error)) return false;
  int fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    *error = ErrnoText(("open " + dir).c_str(), errno);
    return false;
  }
  struct stat opened;
  bool ok = fstat(fd, &opened) == 0 && opened.st_dev == st.st_dev && opened.st_ino == st.st_ino;
  if (!ok) {
    *error = "the fd store directory " + dir + " changed while it was checked; refusing it";
  } else if ((opened.st_mode & 077) != 0 && fchmod(fd, 0700) != 0) {
    *error = ErrnoText(("chmod 0700 " + dir).c_str(), errno);
    ok = false;
  }
  close(fd);
  return ok;
}

// Client side of the sd_notify protocol: one datagram per message, fds as SCM_RIGHTS.
class Notifier {
 public:
  // Reads $NOTIFY_SOCKET (a path, or '@name' for the abstract namespace). Returns nullptr and
  // leaves *error empty when the variable is unset; nullptr with *error set when it is unusable.
  // `keeper_pid`: the keeper's pid (SECCOMP_KEEPER_PID, read when 0 is passed), under seccomp-keeper;
  // then the store must be proven to be that keeper (VerifyKeeper), before this and every send.
  static std::unique_ptr<Notifier> FromEnvironment(std::string* error, long long keeper_pid = 0) {
    error->clear();
    const char* value = getenv("NOTIFY_SOCKET");
    if (value == nullptr || value[0] == '\0') return nullptr;  // systemd treats empty as unset
    std::unique_ptr<Notifier> notifier(new Notifier());
    notifier->address_ = value;
    if (!ParseUnixAddress(notifier->address_, &notifier->addr_, &notifier->addr_length_, error)) return nullptr;
    if (keeper_pid == 0) keeper_pid = KeeperPidFromEnvironment();
    if (keeper_pid > 0 && !notifier->AdoptKeeper(pid_t(keeper_pid), error)) return nullptr;
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
    if (keeper_pidfd_ >= 0) close(keeper_pidfd_);
  }

  // SECCOMP_KEEPER_PID as a pid, 0 when unset or not a pid.
  static long long KeeperPidFromEnvironment() {
    long long pid = 0;
    const char* text = getenv("SECCOMP_KEEPER_PID");
    if (text == nullptr || !command_line::ParseDecimal(text, 1, 4194304, &pid)) return 0;
    return pid;
  }

  // The keeper this notifier sends to (0: systemd or an unverified store).
  pid_t keeper_pid() const { return keeper_pid_; }
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
    if (keeper_pid_ > 0 && !VerifyKeeper(error)) return false;
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

  // Under seccomp-keeper: the store must be a path socket named after the keeper's pid, in a
  // root-only directory, and the keeper our parent, watched through a pidfd.
  bool AdoptKeeper(pid_t pid, std::string* error) {
    const std::string who = "seccomp-keeper (pid " + std::to_string(pid) + ")";
    if (address_[0] != '/') {
      *error = "NOTIFY_SOCKET " + address_ + " of " + who +
               " is an abstract name, which anyone may bind once the keeper is gone; a keeper keeps its socket in a root-only directory";
      return false;
    }
    size_t slash = address_.rfind('/');
    std::string base = address_.substr(slash + 1);
    std::string expected = std::string(kKeeperSocketPrefix) + std::to_string(pid) + "-";
    if (base.rfind(expected, 0) != 0) {
      *error = "NOTIFY_SOCKET " + address_ + " is not the socket of " + who;
      return false;
    }
    keeper_pidfd_ = int(syscall(SYS_pidfd_open, pid, 0));
    if (keeper_pidfd_ < 0) {
      *error = ErrnoText(("pidfd_open of " + who).c_str(), errno);
      return false;
    }
    // Our parent once the pidfd is open: otherwise the pidfd may name a process that reused its pid.
    if (getppid() != pid) {
      *error = who + " is not this process's parent (it died?); its fd store is not trusted";
      return false;
    }
    keeper_pid_ = pid;
    return VerifyKeeper(error);
  }

  // Before every send: the keeper still lives, its directory is root's alone, the socket is root's.
  bool VerifyKeeper(std::string* error) {
    const std::string who = "seccomp-keeper (pid " + std::to_string(keeper_pid_) + ")";
    pollfd p = {keeper_pidfd_, POLLIN, 0};
    if (poll(&p, 1, 0) != 0) {
      *error = who + " has exited: its socket " + address_ + " is not proven to be the live keeper; nothing sent";
      return false;
    }
    std::string dir = address_.substr(0, address_.rfind('/'));
    if (dir.empty()) dir = "/";
    struct stat st;
    if (lstat(dir.c_str(), &st) != 0) {
      *error = ErrnoText(("lstat " + dir).c_str(), errno) + "; nothing sent to " + who;
      return false;
    }
    if (!CheckPrivateDirectory(dir, st, error)) return false;
    if ((st.st_mode & 077) != 0) {
      *error = "the fd store directory " + dir + " is not root's alone; nothing sent to " + who;
      return false;
    }
    if (lstat(address_.c_str(), &st) != 0 || !S_ISSOCK(st.st_mode) || st.st_uid != 0) {
      *error = "NOTIFY_SOCKET " + address_ + " is not a socket owned by root; nothing sent to " + who;
      return false;
    }
    return true;
  }

  std::string address_;
  sockaddr_un addr_;
  socklen_t addr_length_ = 0;
  int fd_ = -1;
  pid_t keeper_pid_ = 0;
  int keeper_pidfd_ = -1;
};

struct ListenedFd {
  int fd;
  std::string name;
};

// SD_LISTEN_FDS_START: the first passed fd.
constexpr int kListenFdsStart = 3;

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
  if (ours && !command_line::ParseDecimal(pid_text, 0, INT_MAX, &pid)) {
    *error = std::string("LISTEN_PID \"") + pid_text + "\" is not a pid";
    ours = false;
  }
  // Variables meant for another process (our parent, say) are dropped too, as sd_listen_fds does,
  // so they do not reach our own children.
  if (ours && pid != getpid()) ours = false;
  if (ours && !command_line::ParseDecimal(fds_text, 0, INT_MAX - kListenFdsStart, &count)) {
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
