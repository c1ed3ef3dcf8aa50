// seccomp-thread-views: each case makes one directory from a NEW thread (never the leader, but for
// the one leader case) that has its own view of the filesystem: its own cwd, root or umask
// (unshare(CLONE_FS)), fsuid/fsgid, supplementary groups or effective capabilities, all changed
// with raw syscalls so they stay the thread's own (glibc's setgroups and setuid change every
// thread). The mkdir is a raw SYS_mkdir (or SYS_mkdirat), so under a filter it is the notifying
// thread the agent must act as. For the conformance test test/integration/emulation-threads.test.ts:
// run it bare and under the agent; the kernel's results and the agent's must be the same.
//
//   seccomp-thread-views --dir D
//
// D is prepared by the test (the same layout for both runs): leader/ cwd/ root/ umask/ open/ (0777)
// closed/ (root 0755) group/ (root:2000 0770) private/ (1000:1000 0700) dirfd/sub/ hidden/ (root
// 0700) hidden/work/ (0777). The workload chroots the whole process into D first (so nothing it
// does, even resolved wrongly, lands outside D), sets the leader's umask 022, cwd /leader and
// groups {2000} (each case's thread differs from the leader in what it tests), then runs the cases
// one after another, each in a fresh thread joined before the next.
//
// Output: one JSON line per case, {"case","rc","errno","made":[{"where","mode","uid","gid"}]}:
// rc and errno of the mkdir, and every directory that appeared anywhere below D meanwhile (its
// path from D, as named on disk), seen by the leader after the thread ended. Exit 0; 3 when a
// case's own setup (unshare, chdir, setfsuid...) failed, which is no result.
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <map>
#include <string>
#include <vector>

namespace {

struct Seen {
  unsigned mode, uid, gid;
  bool operator==(const Seen& o) const { return mode == o.mode && uid == o.uid && gid == o.gid; }
};

[[noreturn]] void Die(const char* what) {
  fprintf(stderr, "seccomp-thread-views: %s: %s\n", what, strerror(errno));
  exit(3);
}

void Check(long rc, const char* what) {
  if (rc != 0) Die(what);
}

// Every directory below `dir` (a path in the process's root), with its mode and owner.
void Scan(const std::string& dir, std::map<std::string, Seen>* out) {
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) Die(("opendir " + dir).c_str());
  while (dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    const std::string path = (dir == "/" ? "" : dir) + "/" + name;
    struct stat st;
    if (lstat(path.c_str(), &st) != 0) Die(("lstat " + path).c_str());
    if (!S_ISDIR(st.st_mode)) continue;
    (*out)[path] = Seen{unsigned(st.st_mode & 07777), unsigned(st.st_uid), unsigned(st.st_gid)};
    Scan(path, out);
  }
  closedir(d);
}

// Per-thread credentials: raw syscalls, never glibc's broadcasting wrappers.
void SetFsIds(unsigned id) {
  syscall(SYS_setfsgid, id);
  syscall(SYS_setfsuid, id);
  // setfsuid returns the previous value: ask again to see it took.
  if (unsigned(syscall(SYS_setfsuid, -1)) != id || unsigned(syscall(SYS_setfsgid, -1)) != id) {
    errno = EPERM;
    Die("setfsuid/setfsgid");
  }
}

void SetGroups(std::vector<gid_t> groups) {
  Check(syscall(SYS_setgroups, groups.size(), groups.data()), "setgroups");
}

// Changes this thread's effective capability set: `drop` taken out, `raise` put (back) in.
void ChangeEffective(std::vector<int> drop, std::vector<int> raise) {
  __user_cap_header_struct hdr = {_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2] = {};
  Check(syscall(SYS_capget, &hdr, data), "capget");
  for (int c : drop) data[c / 32].effective &= ~(1u << (c % 32));
  for (int c : raise) data[c / 32].effective |= 1u << (c % 32);
  Check(syscall(SYS_capset, &hdr, data), "capset");
}

void OwnFs() { Check(unshare(CLONE_FS), "unshare(CLONE_FS)"); }

long Mkdir(const char* path) { return syscall(SYS_mkdir, path, 0777); }

struct Case {
  const char* name;
  bool leader;   // run on the leader itself (the one contrast case)
  long (*run)();  // setup, then the one mkdir; returns its rc (errno kept)
};

const Case kCases[] = {
    {"cwd", false, [] { OwnFs(); Check(chdir("/cwd"), "chdir"); return Mkdir("rel"); }},
    {"root", false, [] { OwnFs(); Check(chroot("/root"), "chroot"); return Mkdir("/abs"); }},
    {"root-cwd", false, [] { OwnFs(); Check(chroot("/root"), "chroot"); Check(chdir("/"), "chdir"); return Mkdir("rel"); }},
    {"umask", false, [] { OwnFs(); umask(027); return Mkdir("/umask/own"); }},
    // A thread sharing the leader's fs: its umask (022), not the last thread's.
    {"umask-shared", false, [] { return Mkdir("/umask/shared"); }},
    {"fsuid", false, [] { SetFsIds(1000); return Mkdir("/open/fs"); }},
    {"fsuid-denied", false, [] { SetFsIds(1000); return Mkdir("/closed/fs"); }},
    {"groups", false, [] { SetGroups({2000}); SetFsIds(1000); return Mkdir("/group/member"); }},
    // The leader is in group 2000; this thread is not.
    {"groups-missing", false, [] { SetGroups({3000}); SetFsIds(1000); return Mkdir("/group/outsider"); }},
    {"caps-dropped", false, [] { ChangeEffective({CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH}, {}); return Mkdir("/private/dropped"); }},
    {"caps-leader", true, [] { return Mkdir("/private/leader"); }},
    // fsuid 1000 took the DAC capabilities out of the effective set; this thread puts one back.
    {"caps-raised", false, [] { SetFsIds(1000); ChangeEffective({}, {CAP_DAC_OVERRIDE}); return Mkdir("/closed/raised"); }},
    {"mkdirat-dirfd", false, [] {
       OwnFs();
       Check(chdir("/dirfd"), "chdir");
       const int fd = open("sub", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
       if (fd < 0) Die("open sub");
       const long rc = syscall(SYS_mkdirat, fd, "at", 0777);
       const int err = errno;
       close(fd);
       errno = err;
       return rc;
     }},
    {"mkdirat-cwd", false, [] { OwnFs(); Check(chdir("/dirfd"), "chdir"); return syscall(SYS_mkdirat, AT_FDCWD, "cwdat", 0777); }},
    // Its cwd lies below a folder it may not search: the kernel starts a relative lookup at the
    // cwd and never looks at the folders above it.
    {"cwd-below-unsearchable", false, [] { OwnFs(); Check(chdir("/hidden/work"), "chdir"); SetFsIds(1000); return Mkdir("made"); }},
};

struct Result {
  long rc;
  int err;
};

void* RunCase(void* arg) {
  const Case* c = static_cast<const Case*>(arg);
  Result* r = new Result;
  r->rc = c->run();
  r->err = r->rc == 0 ? 0 : errno;
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  std::string dir;
  for (int i = 1; i < argc; i++) {
    const std::string arg = argv[i];
    if (arg == "--dir" && i + 1 < argc) dir = argv[++i];
    else {
      fprintf(stderr, "usage: seccomp-thread-views --dir D\n");
      return 2;
    }
  }
  if (dir.empty()) {
    fprintf(stderr, "usage: seccomp-thread-views --dir D\n");
    return 2;
  }
  // One thread so far: glibc's setgroups is the process's.
  const gid_t leader_groups[] = {2000};
  Check(setgroups(1, leader_groups), "setgroups");
  Check(chroot(dir.c_str()), "chroot");
  Check(chdir("/leader"), "chdir /leader");
  umask(022);

  std::map<std::string, Seen> before;
  Scan("/", &before);
  for (const Case& c : kCases) {
    Result r;
    if (c.leader) {
      r.rc = c.run();
      r.err = r.rc == 0 ? 0 : errno;
    } else {
      pthread_t thread;
      errno = pthread_create(&thread, nullptr, RunCase, const_cast<Case*>(&c));
      if (errno != 0) Die("pthread_create");
      void* out = nullptr;
      errno = pthread_join(thread, &out);
      if (errno != 0) Die("pthread_join");
      r = *static_cast<Result*>(out);
      delete static_cast<Result*>(out);
    }
    std::map<std::string, Seen> after;
    Scan("/", &after);
    printf("{\"case\":\"%s\",\"rc\":%ld,\"errno\":%d,\"made\":[", c.name, r.rc, r.err);
    const char* sep = "";
    for (const auto& [path, seen] : after) {
      auto was = before.find(path);
      if (was != before.end() && was->second == seen) continue;
      printf("%s{\"where\":\"%s\",\"mode\":%u,\"uid\":%u,\"gid\":%u}", sep, path.c_str(), seen.mode, seen.uid, seen.gid);
      sep = ",";
    }
    printf("]}\n");
    fflush(stdout);
    before.swap(after);
  }
  return 0;
}
