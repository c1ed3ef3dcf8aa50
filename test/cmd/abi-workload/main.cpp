// seccomp-abi-workload ABI CALL PATH [MODE]: one mkdir (or mkdirat with AT_FDCWD) of PATH through
// the given ABI, from this 64-bit process, and one JSON line with what it returned:
//   i386    int $0x80, i386 numbers (mkdir 39, mkdirat 296), 32-bit arguments: PATH is copied to
//           a page mapped below 4 GiB (MAP_32BIT) so that its address fits in ebx/ecx.
//   x32     syscall with nr | __X32_SYSCALL_BIT (mkdir 83, mkdirat 258). A kernel without
//           CONFIG_X86_X32_ABI answers ENOSYS, but only after the seccomp filter saw the call.
//   x86_64  the plain syscall (the reference).
// Exit status 0 when the call was made (whatever it returned), 2 on bad usage.
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <string>

namespace {

constexpr long kX32Bit = 0x40000000L;
constexpr long kI386Mkdir = 39, kI386Mkdirat = 296;

// int $0x80 with up to three arguments; returns the kernel's value (-errno on failure).
long Int80(long nr, long a, long b, long c) {
  long ret;
  asm volatile("int $0x80" : "=a"(ret) : "a"(nr), "b"(a), "c"(b), "d"(c) : "memory", "r8", "r9", "r10", "r11");
  return ret;
}

// The raw syscall instruction (no libc errno handling): returns -errno on failure.
long Syscall3(long nr, long a, long b, long c) {
  long ret;
  asm volatile("syscall" : "=a"(ret) : "a"(nr), "D"(a), "S"(b), "d"(c) : "rcx", "r11", "memory");
  return ret;
}

const char* ErrnoName(int e) {
  switch (e) {
    case 0: return "";
    case EPERM: return "EPERM";
    case EACCES: return "EACCES";
    case EEXIST: return "EEXIST";
    case ENOENT: return "ENOENT";
    case ENOSYS: return "ENOSYS";
    case EFAULT: return "EFAULT";
    case EINTR: return "EINTR";
    default: return "other";
  }
}

[[noreturn]] void Usage() {
  fputs("usage: seccomp-abi-workload i386|x32|x86_64 mkdir|mkdirat PATH [MODE (octal, default 755)]\n", stderr);
  exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) Usage();
  const std::string abi = argv[1], call = argv[2];
  const char* path = argv[3];
  const long mode = argc > 4 ? strtol(argv[4], nullptr, 8) : 0755;
  const bool at = call == "mkdirat";
  if (!at && call != "mkdir") Usage();
  long ret;
  if (abi == "i386") {
    const size_t len = strlen(path) + 1;
    void* low = mmap(nullptr, len + 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_32BIT, -1, 0);
    if (low == MAP_FAILED) {
      perror("mmap(MAP_32BIT)");
      return 1;
    }
    memcpy(low, path, len);
    const long p = static_cast<long>(reinterpret_cast<uintptr_t>(low));
    // The upper halves a 64-bit caller may leave in the registers: the kernel uses the low ones.
    // AT_FDCWD as i386 passes it: the 32-bit -100.
    ret = at ? Int80(kI386Mkdirat, static_cast<long>(static_cast<uint32_t>(AT_FDCWD)), p, mode) : Int80(kI386Mkdir, p, mode, 0);
  } else if (abi == "x32") {
    ret = at ? Syscall3(kX32Bit | SYS_mkdirat, AT_FDCWD, reinterpret_cast<long>(path), mode)
             : Syscall3(kX32Bit | SYS_mkdir, reinterpret_cast<long>(path), mode, 0);
  } else if (abi == "x86_64") {
    ret = at ? Syscall3(SYS_mkdirat, AT_FDCWD, reinterpret_cast<long>(path), mode) : Syscall3(SYS_mkdir, reinterpret_cast<long>(path), mode, 0);
  } else {
    Usage();
  }
  // int $0x80 returns a 32-bit value in eax: sign-extend it.
  if (abi == "i386") ret = static_cast<int>(ret);
  const int err = ret < 0 && ret > -4096 ? static_cast<int>(-ret) : 0;
  printf("{\"abi\":\"%s\",\"call\":\"%s\",\"rc\":%ld,\"errno\":%d,\"error\":\"%s\"}\n", abi.c_str(), call.c_str(), err ? -1L : ret, err,
         ErrnoName(err));
  return 0;
}
