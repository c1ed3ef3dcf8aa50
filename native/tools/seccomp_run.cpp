// seccomp-run: runs a command under a seccomp filter whose listed syscalls are notified to an
// agent, handing the agent the notify fd exactly the way runc 1.1 does for a profile with
// `listenerPath` (SCM_RIGHTS in the first sendmsg, then the JSON state, then EOF).
#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <string>
#include <utility>
#include <vector>

#include "command_line.h"
#include "json_string.h"
#include "seccomp_compat.h"
#include "syscall_abi.h"
#include "syscall_table_x86_64.h"

namespace {

constexpr size_t kMaxSyscalls = 250;  // BPF conditional jumps reach at most 255 instructions
constexpr int kScmMaxFd = 253;

const char kUsage[] =
    "usage: seccomp-run --socket PATH --syscalls NAME[,NAME...] [options] -- CMD [ARGS...]\n"
    "\n"
    "Installs a seccomp filter (no_new_privs, SECCOMP_FILTER_FLAG_NEW_LISTENER) that notifies the\n"
    "listed x86_64 syscalls and allows everything else, sends the notify fd and an OCI state to the\n"
    "agent listening on PATH exactly as runc 1.1 does for a profile with listenerPath, closes its\n"
    "copy of the fd, then execs CMD.\n"
    "\n"
    "  --socket PATH         the agent's listener socket (e.g. /run/seccomp-agent.socket)\n"
    "  --syscalls LIST       comma-separated syscall names (or numbers) to notify\n"
    "  --metadata S          the profile's listenerMetadata\n"
    "  --annotation K=V      an OCI annotation of the state (repeatable)\n"
    "  --id ID               container id (default seccomp-run-<pid>)\n"
    "  --status S            creating (container init, default) or running (exec)\n"
    "  --bundle DIR          bundle path in the state (default: the current directory)\n"
    "  --arch LIST           also notify the listed names in these ABIs, as a profile's\n"
    "                        architectures do (SCMP_ARCH_X86, SCMP_ARCH_X32): x86 (i386, int $0x80),\n"
    "                        x32 (nr | 0x40000000); names only, a number stays x86_64's\n"
    "  --wait-killable       install the filter with SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV (what crun\n"
    "                        sets from a profile's flags): once received, a notification survives\n"
    "                        the target's signals, and only a fatal one ends its wait\n"
    "  -h, --help            this text\n"
    "\n"
    "For tests (to make bad runtime messages):\n"
    "  --raw-message FILE    send the bytes of FILE instead of the JSON state\n"
    "  --send-fds N          send N copies of the notify fd (0: no fd; default 1)\n"
    "  --send-pipe           send the read end of a pipe instead of the notify fd\n"
    "  --no-filter           install no filter (sends a pipe with --send-pipe, else no fd)\n"
    "  --chunk N             send the message in chunks of N bytes, one sendmsg each\n"
    "\n"
    "The connection is made before the filter is installed; sendmsg, fcntl, close and execve run\n"
    "under it before the agent holds the fd, so they must not be among the notified syscalls\n"
    "(execve is fine: the agent holds the fd by then). Without --arch, syscalls of the other ABIs\n"
    "(i386, x32 numbers) are allowed untouched.\n";

struct Options {
  std::string socket_path;
  std::vector<int> syscalls;
  std::vector<std::string> names;  // as given, for --arch
  bool arch_x86 = false;
  bool arch_x32 = false;
  std::string metadata;
  std::vector<std::pair<std::string, std::string>> annotations;
  std::string id;
  std::string status = "creating";
  std::string bundle;
  std::string raw_message_file;
  bool has_raw_message = false;
  int send_fds = 1;
  bool send_pipe = false;
  bool no_filter = false;
  bool wait_killable = false;
  size_t chunk = 0;
  char** command = nullptr;
};

[[noreturn]] void Usage(const std::string& problem) {
  fprintf(stderr, "seccomp-run: %s\n(seccomp-run --help for usage)\n", problem.c_str());
  exit(2);
}

[[noreturn]] void Fail(const std::string& what) {
  fprintf(stderr, "seccomp-run: %s: %s\n", what.c_str(), strerror(errno));
  exit(1);
}

int LookupSyscall(const std::string& name) {
#define SECCOMP_RUN_LOOKUP(nr, sys) \
  if (name == #sys) return nr;
  SECCOMP_AGENT_SYSCALLS_X86_64(SECCOMP_RUN_LOOKUP)
#undef SECCOMP_RUN_LOOKUP
  if (!name.empty() && name.find_first_not_of("0123456789") == std::string::npos && name.size() < 5) {
    return atoi(name.c_str());
  }
  return -1;
}

Options Parse(int argc, char** argv) {
  Options o;
  command_line::Args args(argc, argv);
  auto value = [&](const char* flag) -> const char* {
    const char* v = args.Value();
    if (v == nullptr) Usage(std::string(flag) + " needs a value");
    return v;
  };
  while (args.Next()) {
    std::string arg = args.Arg();
    if (arg == "--") {
      o.command = args.Rest();
      break;
    }
    if (arg == "-h" || arg == "--help") {
      fputs(kUsage, stdout);
      exit(0);
    } else if (arg == "--socket") {
      o.socket_path = value("--socket");
    } else if (arg == "--syscalls") {
      std::string list = value("--syscalls");
      size_t start = 0;
      while (start <= list.size()) {
        size_t comma = list.find(',', start);
        std::string name = list.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
        if (!name.empty()) {
          int nr = LookupSyscall(name);
          if (nr < 0) Usage("unknown syscall \"" + name + "\" (x86_64 names such as mkdir, mkdirat, mount)");
          o.syscalls.push_back(nr);
          o.names.push_back(name);
        }
        if (comma == std::string::npos) break;
        start = comma + 1;
      }
    } else if (arg == "--arch") {
      std::string list = std::string(",") + value("--arch") + ",";
      for (size_t at = 1; at < list.size();) {
        size_t comma = list.find(',', at);
        const std::string a = list.substr(at, comma - at);
        if (a == "x86" || a == "i386" || a == "SCMP_ARCH_X86") o.arch_x86 = true;
        else if (a == "x32" || a == "SCMP_ARCH_X32") o.arch_x32 = true;
        else if (a != "x86_64" && a != "SCMP_ARCH_X86_64" && !a.empty()) Usage("--arch takes x86, x32 (and x86_64), not \"" + a + "\"");
        at = comma + 1;
      }
    } else if (arg == "--metadata") {
      o.metadata = value("--metadata");
    } else if (arg == "--annotation") {
      std::string kv = value("--annotation");
      size_t eq = kv.find('=');
      if (eq == std::string::npos || eq == 0) Usage("--annotation needs KEY=VALUE, got \"" + kv + "\"");
      o.annotations.emplace_back(kv.substr(0, eq), kv.substr(eq + 1));
    } else if (arg == "--id") {
      o.id = value("--id");
    } else if (arg == "--status") {
      o.status = value("--status");
      if (o.status != "creating" && o.status != "running") Usage("--status must be creating or running");
    } else if (arg == "--bundle") {
      o.bundle = value("--bundle");
    } else if (arg == "--raw-message") {
      o.raw_message_file = value("--raw-message");
      o.has_raw_message = true;
    } else if (arg == "--send-fds") {
      long long n;
      if (!command_line::ParseDecimal(value("--send-fds"), 0, kScmMaxFd, &n)) Usage("--send-fds needs a number from 0 to 253");
      o.send_fds = static_cast<int>(n);
    } else if (arg == "--send-pipe") {
      o.send_pipe = true;
    } else if (arg == "--no-filter") {
      o.no_filter = true;
    } else if (arg == "--wait-killable") {
      o.wait_killable = true;
    } else if (arg == "--chunk") {
      long long n;
      if (!command_line::ParseDecimal(value("--chunk"), 1, 1L << 30, &n)) Usage("--chunk needs a positive number");
      o.chunk = static_cast<size_t>(n);
    } else {
      Usage("unknown option \"" + arg + "\"");
    }
  }
  if (o.command == nullptr || o.command[0] == nullptr) Usage("no command given (put it after --)");
  if (o.socket_path.empty()) Usage("--socket is required");
  if (!o.no_filter && o.syscalls.empty()) Usage("--syscalls is required (or --no-filter)");
  if (o.syscalls.size() > kMaxSyscalls) Usage("at most " + std::to_string(kMaxSyscalls) + " syscalls");
  if (o.no_filter && !o.send_pipe) o.send_fds = 0;
  return o;
}


// The message runc 1.1 sends (libcontainer/seccomp/patchbpf + utils.SendFds), field for field.
std::string StateJson(const Options& o, int fd_count) {
  std::string pid = std::to_string(getpid());
  std::string fds = "[";
  for (int i = 0; i < fd_count; i++) fds += (i ? ",\"seccompFd\"" : "\"seccompFd\"");
  fds += "]";
  std::string annotations = "{";
  for (size_t i = 0; i < o.annotations.size(); i++) {
    if (i) annotations += ",";
    annotations += JsonString(o.annotations[i].first) + ":" + JsonString(o.annotations[i].second);
  }
  annotations += "}";
  std::string id = o.id.empty() ? "seccomp-run-" + pid : o.id;
  return "{\"ociVersion\":\"1.0.2-dev\",\"fds\":" + fds + ",\"pid\":" + pid + ",\"metadata\":" + JsonString(o.metadata) +
         ",\"state\":{\"ociVersion\":\"1.0.2-dev\",\"id\":" + JsonString(id) + ",\"status\":" + JsonString(o.status) +
         ",\"pid\":" + pid + ",\"bundle\":" + JsonString(o.bundle) + ",\"annotations\":" + annotations + "}}";
}

std::string ReadFile(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) Fail("open " + path);
  std::string data;
  char buf[65536];
  for (;;) {
    ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) Fail("read " + path);
    if (n == 0) break;
    data.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  return data;
}

// The numbers of `o`'s names in the other ABIs --arch lists (x86_64's are o.syscalls).
void OtherAbiNumbers(const Options& o, std::vector<uint32_t>* i386, std::vector<uint32_t>* x32) {
  using seccomp_agent::Abi;
  for (const std::string& name : o.names) {
    const int64_t a = o.arch_x86 ? seccomp_agent::SyscallNrIn(Abi::kI386, name.c_str()) : -1;
    const int64_t b = o.arch_x32 ? seccomp_agent::SyscallNrIn(Abi::kX32, name.c_str()) : -1;
    if (a >= 0) i386->push_back(static_cast<uint32_t>(a));
    if (b >= 0) x32->push_back(static_cast<uint32_t>(b));
  }
}

// ld arch; x86_64 (and x32's numbers, with their bit, under the same arch): its checks; i386
// (with --arch x86): its own; any other arch and every unlisted number: ALLOW. One NOTIFY at the end.
int InstallFilter(const Options& o) {
  std::vector<uint32_t> i386, x32;
  OtherAbiNumbers(o, &i386, &x32);
  std::vector<uint32_t> x8664(o.syscalls.begin(), o.syscalls.end());
  x8664.insert(x8664.end(), x32.begin(), x32.end());
  if (x8664.size() + i386.size() > kMaxSyscalls) Usage("at most " + std::to_string(kMaxSyscalls) + " syscall numbers in all ABIs");
  const bool has_i386 = !i386.empty();
  // Layout: [0] ld arch, [1] jeq x86_64, [2] jeq i386 or ret ALLOW, x86_64 block, i386 block, NOTIFY.
  const size_t block64 = 3, block32 = block64 + 1 + x8664.size() + 1;
  const size_t notify = block32 + (has_i386 ? 1 + i386.size() + 1 : 0);
  std::vector<struct sock_filter> prog;
  auto to = [&prog](size_t target) { return static_cast<unsigned char>(target - (prog.size() + 1)); };
  prog.push_back(BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)));
  prog.push_back(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, to(block64), 0));
  if (has_i386) prog.push_back(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_I386, to(block32), to(block32 - 1)));
  else prog.push_back(BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW));
  for (const std::vector<uint32_t>* block : {&x8664, &i386}) {
    if (block == &i386 && !has_i386) break;
    prog.push_back(BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)));
    for (uint32_t nr : *block) prog.push_back(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, nr, to(notify), 0));
    prog.push_back(BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW));
  }
  prog.push_back(BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_USER_NOTIF));
  const bool wait_killable = o.wait_killable;
  struct sock_fprog fprog = {static_cast<unsigned short>(prog.size()), prog.data()};
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) Fail("prctl(PR_SET_NO_NEW_PRIVS)");
  const unsigned long flags = SECCOMP_FILTER_FLAG_NEW_LISTENER | (wait_killable ? SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV : 0);
  long fd = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, flags, &fprog);
  if (fd < 0) Fail(wait_killable ? "seccomp(SECCOMP_SET_MODE_FILTER, NEW_LISTENER | WAIT_KILLABLE_RECV)" : "seccomp(SECCOMP_SET_MODE_FILTER, NEW_LISTENER)");
  return static_cast<int>(fd);
}

void SendAll(int sock, const std::string& message, const std::vector<int>& fds, size_t chunk) {
  size_t off = 0;
  bool first = true;
  std::vector<char> control(CMSG_SPACE(sizeof(int) * (fds.empty() ? 1 : fds.size())), 0);
  while (first || off < message.size()) {
    size_t len = message.size() - off;
    if (chunk > 0 && len > chunk) len = chunk;
    struct iovec iov = {const_cast<char*>(message.data() + off), len};
    struct msghdr msg;
    memset(&msg, 0, sizeof msg);
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    if (first && !fds.empty()) {
      msg.msg_control = control.data();
      msg.msg_controllen = CMSG_SPACE(sizeof(int) * fds.size());
      struct cmsghdr* c = CMSG_FIRSTHDR(&msg);
      c->cmsg_level = SOL_SOCKET;
      c->cmsg_type = SCM_RIGHTS;
      c->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
      memcpy(CMSG_DATA(c), fds.data(), sizeof(int) * fds.size());
    }
    ssize_t n = sendmsg(sock, &msg, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      Fail("sendmsg to the agent");
    }
    off += static_cast<size_t>(n);
    first = false;
    if (chunk > 0 && off < message.size()) {
      // Give the agent a chance to read each chunk on its own: the point of --chunk.
      struct timespec ts = {0, 2000000};
      nanosleep(&ts, nullptr);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  Options o = Parse(argc, argv);
  if (o.bundle.empty()) {
    char cwd[4096];
    if (getcwd(cwd, sizeof cwd) == nullptr) Fail("getcwd");
    o.bundle = cwd;
  }
  std::string raw;
  if (o.has_raw_message) raw = ReadFile(o.raw_message_file);

  struct sockaddr_un addr;
  memset(&addr, 0, sizeof addr);
  addr.sun_family = AF_UNIX;
  if (o.socket_path.size() >= sizeof addr.sun_path) Usage("--socket path too long");
  memcpy(addr.sun_path, o.socket_path.data(), o.socket_path.size());

  // Everything that can happen before the filter does, so that only sendmsg, fcntl (dups), close
  // and execve run under it before the agent holds the fd.
  int pipe_fds[2] = {-1, -1};
  if (o.send_pipe && pipe2(pipe_fds, O_CLOEXEC) != 0) Fail("pipe2");
  const bool has_source = o.send_pipe || !o.no_filter;
  std::string message = o.has_raw_message ? raw : StateJson(o, has_source ? o.send_fds : 0);
  int sock = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (sock < 0) Fail("socket(AF_UNIX)");
  if (connect(sock, reinterpret_cast<struct sockaddr*>(&addr), sizeof addr) != 0) Fail("connect " + o.socket_path);

  int notify_fd = o.no_filter ? -1 : InstallFilter(o);
  int source = o.send_pipe ? pipe_fds[0] : notify_fd;
  std::vector<int> fds;
  for (int i = 0; i < o.send_fds && source >= 0; i++) {
    int fd = i == 0 ? source : fcntl(source, F_DUPFD_CLOEXEC, 0);
    if (fd < 0) Fail("dup of the fd to send");
    fds.push_back(fd);
  }
  SendAll(sock, message, fds, o.chunk);
  close(sock);
  for (int fd : fds) {
    if (fd != notify_fd && fd != pipe_fds[0]) close(fd);
  }
  if (notify_fd >= 0) close(notify_fd);
  if (pipe_fds[0] >= 0) close(pipe_fds[0]);
  if (pipe_fds[1] >= 0) close(pipe_fds[1]);

  execvp(o.command[0], o.command);
  fprintf(stderr, "seccomp-run: exec %s: %s\n", o.command[0], strerror(errno));
  return 127;
}
