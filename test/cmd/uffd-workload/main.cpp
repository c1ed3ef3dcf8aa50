// seccomp-uffd-workload DIR [THREADS]: mkdir from THREADS threads (1: DIR; more: DIR.0, DIR.1, ...),
// each path's bytes on one page registered with a userfaultfd, so whoever reads a path first (a
// thread's own kernel call, or an agent reading the notifying task's memory) waits in that page's
// fault until this process resolves it. Prints "stalled" once a fault is seen, resolves the page on
// SIGUSR1 (it then holds the paths), and prints the mkdirs' results as one JSON line. The workload
// of test/integration/engine-read-watch.test.ts.
#include <errno.h>
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace {

constexpr size_t kPage = 4096;
constexpr size_t kSlot = 256;  // each thread's path at its own offset of the page
constexpr size_t kMaxThreads = kPage / kSlot;
char* g_page = nullptr;
int g_result[kMaxThreads];
int g_errno[kMaxThreads];

void* MakeDir(void* arg) {
  const size_t i = reinterpret_cast<size_t>(arg);
  g_result[i] = mkdir(g_page + i * kSlot, 0755);
  g_errno[i] = g_result[i] == 0 ? 0 : errno;
  return nullptr;
}

int Die(const char* what) {
  fprintf(stderr, "seccomp-uffd-workload: %s: %s\n", what, strerror(errno));
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  const size_t threads = argc == 3 ? strtoul(argv[2], nullptr, 10) : 1;
  if (argc < 2 || argc > 3 || strlen(argv[1]) + 8 >= kSlot || threads < 1 || threads > kMaxThreads) {
    fprintf(stderr, "usage: seccomp-uffd-workload DIR [THREADS]\n");
    return 2;
  }
  g_page = static_cast<char*>(mmap(nullptr, kPage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  if (g_page == MAP_FAILED) return Die("mmap");
  // Kernel faults too (an agent's process_vm_readv is one): not UFFD_USER_MODE_ONLY.
  const int uffd = static_cast<int>(syscall(SYS_userfaultfd, O_CLOEXEC));
  if (uffd < 0) return Die("userfaultfd");
  struct uffdio_api api = {UFFD_API, 0, 0};
  if (ioctl(uffd, UFFDIO_API, &api) != 0) return Die("UFFDIO_API");
  struct uffdio_register reg;
  memset(&reg, 0, sizeof reg);
  reg.range.start = reinterpret_cast<uint64_t>(g_page);
  reg.range.len = kPage;
  reg.mode = UFFDIO_REGISTER_MODE_MISSING;
  if (ioctl(uffd, UFFDIO_REGISTER, &reg) != 0) return Die("UFFDIO_REGISTER");

  // SIGUSR1 is taken by sigwait only: the thread in mkdir never sees it.
  sigset_t usr1;
  sigemptyset(&usr1);
  sigaddset(&usr1, SIGUSR1);
  pthread_sigmask(SIG_BLOCK, &usr1, nullptr);
  pthread_t thread[kMaxThreads];
  for (size_t i = 0; i < threads; i++) {
    if (pthread_create(&thread[i], nullptr, MakeDir, reinterpret_cast<void*>(i)) != 0) return Die("pthread_create");
  }

  struct uffd_msg msg;
  ssize_t n;
  while ((n = read(uffd, &msg, sizeof msg)) < 0 && errno == EINTR) {
  }
  if (n != sizeof msg || msg.event != UFFD_EVENT_PAGEFAULT) return Die("reading the userfaultfd");
  printf("stalled\n");
  fflush(stdout);
  int sig = 0;
  sigwait(&usr1, &sig);

  static char source[kPage];
  for (size_t i = 0; i < threads; i++) {
    if (threads == 1) {
      snprintf(source + i * kSlot, kSlot, "%s", argv[1]);
    } else {
      snprintf(source + i * kSlot, kSlot, "%s.%zu", argv[1], i);
    }
  }
  struct uffdio_copy copy;
  memset(&copy, 0, sizeof copy);
  copy.dst = reinterpret_cast<uint64_t>(g_page);
  copy.src = reinterpret_cast<uint64_t>(source);
  copy.len = kPage;
  if (ioctl(uffd, UFFDIO_COPY, &copy) != 0) return Die("UFFDIO_COPY");
  for (size_t i = 0; i < threads; i++) pthread_join(thread[i], nullptr);
  printf("{\"mkdir\":[");
  for (size_t i = 0; i < threads; i++) printf("%s%d", i == 0 ? "" : ",", g_result[i]);
  printf("],\"errno\":[");
  for (size_t i = 0; i < threads; i++) printf("%s%d", i == 0 ? "" : ",", g_errno[i]);
  printf("]}\n");
  return 0;
}
