#include "predecessor_emulations.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>

#include "notify_fd.hpp"

namespace seccomp_agent {
namespace {

// How often the notifications are looked at (NOTIF_ID_VALID each), and /proc for helpers.
constexpr uint64_t kPollNs = 2000000ull;
constexpr uint64_t kScanNs = 10000000ull;
// The helper's comm: "seccomp-nshelper" cut to TASK_COMM_LEN - 1 characters.
constexpr char kHelperComm[] = "seccomp-nshelpe";

// A live (not zombie) root process named like a helper, and its parent; false otherwise.
bool ReadHelperStat(int proc, const char* pid_text, pid_t* ppid) {
  struct stat st;
  if (fstatat(proc, pid_text, &st, 0) != 0 || st.st_uid != 0) return false;
  char path[64];
  snprintf(path, sizeof path, "%s/stat", pid_text);
  int fd = openat(proc, path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char buf[512];
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return false;
  buf[n] = '\0';
  // "pid (comm) state ppid ...": comm may hold anything but ends at the last ')'.
  const char* open = strchr(buf, '(');
  const char* close_paren = strrchr(buf, ')');
  if (open == nullptr || close_paren == nullptr || close_paren < open) return false;
  const size_t len = static_cast<size_t>(close_paren - open - 1);
  if (len != sizeof kHelperComm - 1 || memcmp(open + 1, kHelperComm, len) != 0) return false;
  char state = 0;
  int parent = 0;
  if (sscanf(close_paren + 1, " %c %d", &state, &parent) != 2) return false;
  if (state == 'Z' || state == 'X' || state == 'x') return false;  // exited: it carries nothing
  *ppid = parent;
  return true;
}

}  // namespace

std::vector<pid_t> PredecessorEmulations::ForeignHelpers(pid_t self) {
  std::vector<pid_t> found;
  int proc = open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (proc < 0) return found;
  DIR* dir = fdopendir(dup(proc));
  if (dir != nullptr) {
    while (dirent* e = readdir(dir)) {
      if (e->d_name[0] < '1' || e->d_name[0] > '9') continue;
      pid_t ppid = 0;
      if (ReadHelperStat(proc, e->d_name, &ppid) && ppid != self) found.push_back(static_cast<pid_t>(atoi(e->d_name)));
    }
    closedir(dir);
  }
  close(proc);
  return found;
}

PredecessorEmulations::PredecessorEmulations(std::vector<Item> items, uint64_t timeout_ns, Done done)
    : items_(std::move(items)), timeout_ns_(timeout_ns), done_(std::move(done)) {
  waiting_.store(items_.size());
}

std::unique_ptr<PredecessorEmulations> PredecessorEmulations::Start(std::vector<Item> items, uint64_t timeout_ns,
                                                                    Done done, std::string* error) {
  std::unique_ptr<PredecessorEmulations> waiter(new PredecessorEmulations(std::move(items), timeout_ns, std::move(done)));
  // The thread takes no signals: they belong to Node's main thread.
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  int rc = pthread_create(&waiter->thread_, nullptr, &PredecessorEmulations::ThreadMain, waiter.get());
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  if (rc != 0) {
    *error = std::string("pthread_create: ") + strerror(rc);
    for (Item& item : waiter->items_) close(item.notify_fd);
    waiter->items_.clear();
    return nullptr;
  }
  waiter->joinable_ = true;
  return waiter;
}

PredecessorEmulations::~PredecessorEmulations() { Stop(); }

void PredecessorEmulations::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (joinable_) {
    pthread_join(thread_, nullptr);
    joinable_ = false;
  }
  for (Item& item : items_) close(item.notify_fd);
  items_.clear();
}

void* PredecessorEmulations::ThreadMain(void* self) {
  pthread_setname_np(pthread_self(), "seccomp-predwait");
  static_cast<PredecessorEmulations*>(self)->Run();
  return nullptr;
}

void PredecessorEmulations::Report(size_t index, Fate fate) {
  done_(items_[index], fate);
  close(items_[index].notify_fd);
  items_.erase(items_.begin() + static_cast<long>(index));
  waiting_.store(items_.size());
}

void PredecessorEmulations::Run() {
  const pid_t self = getpid();
  const uint64_t deadline = MonotonicNs() + timeout_ns_;
  uint64_t scanned_ns = 0;
  std::vector<pid_t> helpers;
  while (!items_.empty()) {
    const uint64_t now = MonotonicNs();
    if (now - scanned_ns >= kScanNs) {
      // The scan comes before the validity checks below: a helper that answered and exited since
      // the last look has left its notification answered, so "none lives, still pending" means
      // none of them did it.
      helpers = ForeignHelpers(self);
      scanned_ns = now;
    }
    for (size_t i = items_.size(); i-- > 0;) {
      if (!NotifyIdValid(items_[i].notify_fd, items_[i].notification.id)) Report(i, Fate::kAnsweredByHelper);
    }
    if (items_.empty()) break;
    if (helpers.empty()) {
      while (!items_.empty()) Report(items_.size() - 1, Fate::kNotDone);
      break;
    }
    if (now >= deadline) {
      for (pid_t pid : helpers) {
        int pidfd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
        if (pidfd < 0) continue;
        // The pid named a helper a moment ago; checked again now that the pidfd pins it.
        pid_t ppid = 0;
        char text[16];
        snprintf(text, sizeof text, "%d", pid);
        int proc = open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (proc >= 0 && ReadHelperStat(proc, text, &ppid) && ppid != self) {
          syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, nullptr, 0);
        }
        if (proc >= 0) close(proc);
        close(pidfd);
      }
      for (size_t i = items_.size(); i-- > 0;) {
        Report(i, NotifyIdValid(items_[i].notify_fd, items_[i].notification.id) ? Fate::kTimedOut : Fate::kAnsweredByHelper);
      }
      break;
    }
    std::unique_lock<std::mutex> lock(mu_);
    if (cv_.wait_for(lock, std::chrono::nanoseconds(kPollNs), [this] { return stop_; })) return;
  }
}

}  // namespace seccomp_agent
