#include "target_memory.hpp"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

namespace seccomp_agent {
namespace {

constexpr uint64_t kPage = 4096;

// Fallback for kernels or setups where process_vm_readv is refused (EPERM under some LSMs,
// ENOSYS when compiled out). Reads the same page-bounded chunks through /proc/pid/mem.
bool ReadViaProcMem(pid_t pid, uint64_t addr, char* buf, TargetString* out) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/mem", static_cast<int>(pid));
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  size_t got = 0;
  bool ok = false;
  while (got < kTargetPathMax) {
    uint64_t cur = addr + got;
    size_t chunk = static_cast<size_t>(kPage - (cur % kPage));
    if (chunk > kTargetPathMax - got) chunk = kTargetPathMax - got;
    ssize_t n = pread(fd, buf + got, chunk, static_cast<off_t>(cur));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    const char* nul = static_cast<const char*>(memchr(buf + got, 0, static_cast<size_t>(n)));
    if (nul != nullptr) {
      out->length = static_cast<size_t>(nul - buf);
      out->truncated = false;
      ok = true;
      break;
    }
    got += static_cast<size_t>(n);
    if (got == kTargetPathMax) {
      out->length = kTargetPathMax;
      out->truncated = true;
      ok = true;
    }
  }
  close(fd);
  return ok;
}

}  // namespace

bool ReadTargetString(pid_t pid, uint64_t addr, char* buf, TargetString* out) {
  if (addr == 0) return false;
  size_t got = 0;
  // Chunks end at page boundaries: a chunk that would span into an unmapped page fails as a
  // whole, while the string may well end before that page.
  while (got < kTargetPathMax) {
    uint64_t cur = addr + got;
    if (cur < addr) return false;  // wrapped around the address space
    size_t chunk = static_cast<size_t>(kPage - (cur % kPage));
    if (chunk > kTargetPathMax - got) chunk = kTargetPathMax - got;
    struct iovec local = {buf + got, chunk};
    struct iovec remote = {reinterpret_cast<void*>(static_cast<uintptr_t>(cur)), chunk};
    ssize_t n = process_vm_readv(pid, &local, 1, &remote, 1, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (got == 0 && (errno == EPERM || errno == ENOSYS)) return ReadViaProcMem(pid, addr, buf, out);
      return false;  // EFAULT (bad pointer), ESRCH (task gone): no string
    }
    if (n == 0) return false;
    const char* nul = static_cast<const char*>(memchr(buf + got, 0, static_cast<size_t>(n)));
    if (nul != nullptr) {
      out->length = static_cast<size_t>(nul - buf);
      out->truncated = false;
      return true;
    }
    got += static_cast<size_t>(n);
  }
  out->length = kTargetPathMax;
  out->truncated = true;
  return true;
}

}  // namespace seccomp_agent
