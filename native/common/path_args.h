// Which arguments of a syscall are path strings, so the engine can read them from the target's
// memory before the notification reaches anyone. Kept by canonical number (syscall_abi.h): a name
// the ABIs share has its paths at the same positions in each (mkdir's 0, mkdirat's 1, mount's 0 to
// 2 and 4); names only i386 has are listed by their i386 number. Extend by adding a line to kPathArgs.
#pragma once
#include <array>
#include <cstdint>

#include "syscall_abi.h"
#include "syscall_table_x86_64.h"

namespace seccomp_agent {

// kSys_mkdir == 83 and so on, straight from the syscall table.
enum SyscallNrX8664 : int {
#define SECCOMP_AGENT_SYSCALL_ENUM(nr, name) kSys_##name = nr,
  SECCOMP_AGENT_SYSCALLS_X86_64(SECCOMP_AGENT_SYSCALL_ENUM)
#undef SECCOMP_AGENT_SYSCALL_ENUM
};

// One past the largest syscall number in the table.
constexpr int kSyscallLimitX8664 = syscall_abi_detail::LimitX8664();

// kSysI386_stat64 == 195 and so on (i386 numbers, for the names only i386 has).
enum SyscallNrI386 : int {
#define SECCOMP_AGENT_SYSCALL_ENUM(nr, name, canonical) kSysI386_##name = nr,
  SECCOMP_AGENT_SYSCALLS_I386(SECCOMP_AGENT_SYSCALL_ENUM)
#undef SECCOMP_AGENT_SYSCALL_ENUM
};

// The canonical number of a name only i386 has.
constexpr int I386Only(int i386_nr) { return kI386OnlyBase + i386_nr; }

struct PathArgs {
  int nr;
  uint8_t mask;  // bit i set: args[i] points to a NUL-terminated path
};

constexpr uint8_t A(int i) { return static_cast<uint8_t>(1u << i); }

constexpr PathArgs kPathArgs[] = {
    {kSys_open, A(0)},
    {kSys_creat, A(0)},
    {kSys_openat, A(1)},
    {kSys_mkdir, A(0)},
    {kSys_mkdirat, A(1)},
    {kSys_unlink, A(0)},
    {kSys_unlinkat, A(1)},
    {kSys_rmdir, A(0)},
    {kSys_mount, A(0) | A(1) | A(2) | A(4)},  // source, target, fstype, data (options text)
    {kSys_umount2, A(0)},
    {kSys_execve, A(0)},
    {kSys_execveat, A(1)},
    {kSys_chmod, A(0)},
    {kSys_fchmodat, A(1)},
    {kSys_fchmodat2, A(1)},
    {kSys_chown, A(0)},
    {kSys_lchown, A(0)},
    {kSys_fchownat, A(1)},
    {kSys_rename, A(0) | A(1)},
    {kSys_renameat, A(1) | A(3)},
    {kSys_renameat2, A(1) | A(3)},
    {kSys_symlink, A(0) | A(1)},
    {kSys_symlinkat, A(0) | A(2)},
    {kSys_link, A(0) | A(1)},
    {kSys_linkat, A(1) | A(3)},
    {kSys_mknod, A(0)},
    {kSys_mknodat, A(1)},
    {kSys_chdir, A(0)},
    {kSys_chroot, A(0)},
    {kSys_truncate, A(0)},
    {kSys_access, A(0)},
    {kSys_faccessat, A(1)},
    {kSys_faccessat2, A(1)},
    {kSys_stat, A(0)},
    {kSys_lstat, A(0)},
    {kSys_newfstatat, A(1)},
    {kSys_statx, A(1)},
    {kSys_readlink, A(0)},
    {kSys_readlinkat, A(1)},
    {kSys_pivot_root, A(0) | A(1)},
    {kSys_open_tree, A(1)},
    {kSys_move_mount, A(1) | A(3)},
    {kSys_fsopen, A(0)},
    // Names only i386 has.
    {I386Only(kSysI386_oldstat), A(0)},
    {I386Only(kSysI386_oldlstat), A(0)},
    {I386Only(kSysI386_stat64), A(0)},
    {I386Only(kSysI386_lstat64), A(0)},
    {I386Only(kSysI386_fstatat64), A(1)},
    {I386Only(kSysI386_umount), A(0)},
    {I386Only(kSysI386_truncate64), A(0)},
    {I386Only(kSysI386_chown32), A(0)},
    {I386Only(kSysI386_lchown32), A(0)},
};

// Dense lookup built at compile time: the hot path does one array index.
constexpr std::array<uint8_t, kCanonicalSyscallLimit> MakePathArgMasks() {
  std::array<uint8_t, kCanonicalSyscallLimit> masks{};
  for (const PathArgs& entry : kPathArgs) masks[entry.nr] |= entry.mask;
  return masks;
}
constexpr std::array<uint8_t, kCanonicalSyscallLimit> kPathArgMasks = MakePathArgMasks();

// Mask of path arguments of the syscall of canonical number `nr` (0: none, also for -1).
inline uint8_t PathArgMask(int nr) {
  if (nr < 0 || nr >= kCanonicalSyscallLimit) return 0;
  return kPathArgMasks[static_cast<size_t>(nr)];
}

}  // namespace seccomp_agent
