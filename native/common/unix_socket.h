// A listening Unix socket at a path, made one way by everyone who listens on one: the data
// plane's runtime listener, decision channel and handoff socket, and the bench's bare C responder
// (which must accept runtime connections as the data plane does). Header-only, no exceptions.
#pragma once
#include <errno.h>
#include <stddef.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <string>

namespace seccomp_agent {

// JS thread. Creates a non-blocking Unix socket of `type` (stream unless said) at `path` (a stale socket file there is
// removed first, anything else there is an error), binds it, chmods it to `mode` and listens.
// Returns the fd, or -1 with *error set; `what` names the socket in messages.
inline int ListenUnixSocket(const std::string& path, unsigned mode, const char* what, std::string* error,
                            int type = SOCK_STREAM) {
  struct sockaddr_un addr;
  memset(&addr, 0, sizeof addr);
  addr.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof addr.sun_path) {
    *error = std::string(what) + " path \"" + path + "\" is empty or longer than " +
             std::to_string(sizeof addr.sun_path - 1) + " bytes";
    return -1;
  }
  memcpy(addr.sun_path, path.data(), path.size());
  struct stat st;
  if (lstat(path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) {
      *error = std::string(what) + " path " + path + " exists and is not a socket; not removing it";
      return -1;
    }
    if (unlink(path.c_str()) != 0 && errno != ENOENT) {
      *error = "cannot remove stale socket " + path + ": " + strerror(errno);
      return -1;
    }
  }
  int fd = socket(AF_UNIX, type | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) {
    *error = std::string("socket(AF_UNIX): ") + strerror(errno);
    return -1;
  }
  // chmod before listen(): until then a connect() is refused, so no one gets in under the umask's mode.
  const char* step = nullptr;
  if (bind(fd, reinterpret_cast<struct sockaddr*>(&addr), sizeof addr) != 0) {
    step = "bind";
  } else if (chmod(path.c_str(), mode) != 0) {
    step = "chmod";
  } else if (listen(fd, SOMAXCONN) != 0) {
    step = "listen";
  }
  if (step != nullptr) {
    *error = std::string(step) + " " + path + ": " + strerror(errno);
    close(fd);
    return -1;
  }
  return fd;
}

// Any thread. The path a Unix socket is bound to (getsockname); "" when it has none or is abstract.
inline std::string SocketPath(int fd) {
  struct sockaddr_un addr;
  memset(&addr, 0, sizeof addr);
  socklen_t len = sizeof addr;
  if (getsockname(fd, reinterpret_cast<struct sockaddr*>(&addr), &len) != 0 || addr.sun_family != AF_UNIX) return std::string();
  if (len <= offsetof(struct sockaddr_un, sun_path) || addr.sun_path[0] == '\0') return std::string();
  return std::string(addr.sun_path, strnlen(addr.sun_path, len - offsetof(struct sockaddr_un, sun_path)));
}

}  // namespace seccomp_agent
