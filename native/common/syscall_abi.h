// The three x86 ABIs a filter may let through (seccomp_data.arch and nr), and one numbering that
// rules, emulations and path arguments are kept by: the canonical number of a syscall is its x86_64
// number when x86_64 has that name (i386's mkdir 39 and x32's 0x40000053 are both 83), else
// kI386OnlyBase + its i386 number (stat64, chown32, socketcall: names only i386 has). So a rule
// written for `mkdir` covers every ABI's mkdir, and a rule for `stat64` only i386's.
// The x86_64 path costs one test (CanonicalNr). Pure, no allocation, any thread.
#pragma once
#include <linux/audit.h>
#include <stdint.h>

#include <array>
#include <cstring>

#include "syscall_table_i386.h"
#include "syscall_table_x32.h"
#include "syscall_table_x86_64.h"

namespace seccomp_agent {

constexpr uint32_t kX32SyscallBit = 0x40000000u;  // __X32_SYSCALL_BIT
constexpr int kI386OnlyBase = 512;

enum class Abi : uint8_t { kX8664, kI386, kX32, kUnknown };

namespace syscall_abi_detail {

template <size_t N>
struct Table {
  std::array<int16_t, N> canonical{};  // -1: no such call
  std::array<const char*, N> names{};
};

// One past the largest number of an X-macro list, whichever its arity.
#define SECCOMP_AGENT_ABI_MAX(nr, ...) \
  if ((nr) + 1 > limit) limit = (nr) + 1;
constexpr int LimitX8664() {
  int limit = 0;
  SECCOMP_AGENT_SYSCALLS_X86_64(SECCOMP_AGENT_ABI_MAX)
  return limit;
}
constexpr int LimitI386() {
  int limit = 0;
  SECCOMP_AGENT_SYSCALLS_I386(SECCOMP_AGENT_ABI_MAX)
  return limit;
}
constexpr int LimitX32() {
  int limit = 0;
  SECCOMP_AGENT_SYSCALLS_X32(SECCOMP_AGENT_ABI_MAX)
  return limit;
}
#undef SECCOMP_AGENT_ABI_MAX

}  // namespace syscall_abi_detail

constexpr int kSyscallLimitI386 = syscall_abi_detail::LimitI386();
constexpr int kSyscallLimitX32 = syscall_abi_detail::LimitX32();
// One past the largest canonical number (the size of a rule's syscall set).
constexpr int kCanonicalSyscallLimit = kI386OnlyBase + kSyscallLimitI386;
static_assert(syscall_abi_detail::LimitX8664() <= kI386OnlyBase, "x86_64 numbers reach the i386-only range");

namespace syscall_abi_detail {

// A row's canonical number: x86_64's rows (nr, name) are their own; the others' (nr, name, canon) say it.
constexpr int Canonical(int nr) { return nr; }
constexpr int Canonical(int, int canonical) { return canonical; }
template <size_t N>
constexpr Table<N> EmptyTable() {
  Table<N> t{};
  for (auto& c : t.canonical) c = -1;
  return t;
}
#define SECCOMP_AGENT_ABI_ROW(nr, name, ...)              \
  t.canonical[nr] = int16_t(Canonical(nr, ##__VA_ARGS__)); \
  t.names[nr] = #name;
constexpr Table<LimitX8664()> MakeX8664() {
  auto t = EmptyTable<LimitX8664()>();
  SECCOMP_AGENT_SYSCALLS_X86_64(SECCOMP_AGENT_ABI_ROW)
  return t;
}
constexpr Table<kSyscallLimitI386> MakeI386() {
  auto t = EmptyTable<kSyscallLimitI386>();
  SECCOMP_AGENT_SYSCALLS_I386(SECCOMP_AGENT_ABI_ROW)
  return t;
}
constexpr Table<kSyscallLimitX32> MakeX32() {
  auto t = EmptyTable<kSyscallLimitX32>();
  SECCOMP_AGENT_SYSCALLS_X32(SECCOMP_AGENT_ABI_ROW)
  return t;
}
#undef SECCOMP_AGENT_ABI_ROW
// Canonical number -> name (x86_64's, else i386's).
constexpr std::array<const char*, kCanonicalSyscallLimit> MakeCanonicalNames() {
  std::array<const char*, kCanonicalSyscallLimit> names{};
#define SECCOMP_AGENT_ABI_ROW(nr, name) names[nr] = #name;
  SECCOMP_AGENT_SYSCALLS_X86_64(SECCOMP_AGENT_ABI_ROW)
#undef SECCOMP_AGENT_ABI_ROW
#define SECCOMP_AGENT_ABI_ROW(nr, name, canon) \
  if ((canon) >= kI386OnlyBase) names[canon] = #name;
  SECCOMP_AGENT_SYSCALLS_I386(SECCOMP_AGENT_ABI_ROW)
#undef SECCOMP_AGENT_ABI_ROW
  return names;
}

inline constexpr Table<LimitX8664()> kX8664 = MakeX8664();
inline constexpr Table<kSyscallLimitI386> kI386 = MakeI386();
inline constexpr Table<kSyscallLimitX32> kX32 = MakeX32();
inline constexpr std::array<const char*, kCanonicalSyscallLimit> kCanonicalNames = MakeCanonicalNames();

template <size_t N>
constexpr int Lookup(const Table<N>& t, uint32_t nr) {
  return nr < N ? t.canonical[nr] : -1;
}
template <size_t N>
constexpr const char* NameIn(const Table<N>& t, uint32_t nr) {
  return nr < N ? t.names[nr] : nullptr;
}

}  // namespace syscall_abi_detail

// Which ABI a notification's (arch, nr) is.
constexpr Abi AbiOf(uint32_t arch, uint32_t nr) {
  if (arch == AUDIT_ARCH_X86_64) return (nr & kX32SyscallBit) != 0 ? Abi::kX32 : Abi::kX8664;
  return arch == AUDIT_ARCH_I386 ? Abi::kI386 : Abi::kUnknown;
}

// For people and the proto: "x86_64", "i386", "x32", "unknown".
constexpr const char* AbiName(Abi abi) {
  switch (abi) {
    case Abi::kX8664: return "x86_64";
    case Abi::kI386: return "i386";
    case Abi::kX32: return "x32";
    default: return "unknown";
  }
}

// The canonical number of (arch, nr), or -1 when that ABI has no such call (or the arch is none of the three).
inline int CanonicalNrSlow(uint32_t arch, uint32_t nr) {
  using namespace syscall_abi_detail;
  switch (AbiOf(arch, nr)) {
    case Abi::kX8664: return Lookup(kX8664, nr);
    case Abi::kI386: return Lookup(kI386, nr);
    case Abi::kX32: return Lookup(kX32, nr & ~kX32SyscallBit);
    default: return -1;
  }
}
inline int CanonicalNr(uint32_t arch, uint32_t nr) {
  // x86_64's numbers are their own canonical numbers (a hole in the table is matched by no name).
  if (arch == AUDIT_ARCH_X86_64 && nr < static_cast<uint32_t>(syscall_abi_detail::LimitX8664())) return static_cast<int>(nr);
  return CanonicalNrSlow(arch, nr);
}

// The call's name in its own ABI ("mkdir", i386's "stat64"); nullptr when unknown.
inline const char* SyscallNameOf(uint32_t arch, uint32_t nr) {
  using namespace syscall_abi_detail;
  switch (AbiOf(arch, nr)) {
    case Abi::kX8664: return NameIn(kX8664, nr);
    case Abi::kI386: return NameIn(kI386, nr);
    case Abi::kX32: return NameIn(kX32, nr & ~kX32SyscallBit);
    default: return nullptr;
  }
}

// The name of a canonical number; nullptr when none.
inline const char* CanonicalName(int canonical) {
  if (canonical < 0 || canonical >= kCanonicalSyscallLimit) return nullptr;
  return syscall_abi_detail::kCanonicalNames[static_cast<size_t>(canonical)];
}

// The canonical number of a name of any of the three ABIs; -1 when none has it.
inline int CanonicalNrNamed(const char* name) {
  for (int i = 0; i < kCanonicalSyscallLimit; ++i) {
    const char* n = syscall_abi_detail::kCanonicalNames[static_cast<size_t>(i)];
    if (n != nullptr && strcmp(n, name) == 0) return i;
  }
  return -1;
}

// The number `name` has in `abi` (x32: with its bit), or -1 when that ABI has no such call.
inline int64_t SyscallNrIn(Abi abi, const char* name) {
  using namespace syscall_abi_detail;
  auto find = [name](const auto& t) -> int64_t {
    for (size_t i = 0; i < t.names.size(); ++i) {
      if (t.names[i] != nullptr && strcmp(t.names[i], name) == 0) return static_cast<int64_t>(i);
    }
    return -1;
  };
  switch (abi) {
    case Abi::kX8664: return find(kX8664);
    case Abi::kI386: return find(kI386);
    case Abi::kX32: {
      const int64_t nr = find(kX32);
      return nr < 0 ? -1 : (nr | kX32SyscallBit);
    }
    default: return -1;
  }
}

// The audit arch a notification of `abi` carries (x32: AUDIT_ARCH_X86_64, with the bit in nr).
constexpr uint32_t AuditArchOf(Abi abi) { return abi == Abi::kI386 ? AUDIT_ARCH_I386 : AUDIT_ARCH_X86_64; }

// i386's arguments are 32 bits wide: the kernel's ia32 entry uses only the low halves of the
// registers, so the upper halves (whatever a 64-bit process left there before int $0x80) are
// dropped before anyone reads a path or compares an argument.
constexpr uint64_t ArgOfAbi(uint32_t arch, uint64_t arg) {
  return arch == AUDIT_ARCH_I386 ? (arg & 0xffffffffull) : arg;
}

}  // namespace seccomp_agent
