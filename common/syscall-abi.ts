// The three x86 ABIs a seccomp filter may let through, told apart the way the kernel reports them
// (native/common/syscall_abi.h): seccomp_data.arch AUDIT_ARCH_X86_64 or AUDIT_ARCH_I386, and for
// x32 AUDIT_ARCH_X86_64 with __X32_SYSCALL_BIT (0x40000000) in the number. Shared by the data plane
// (names in its events), the control plane and seccompctl (what explain and watch show).

export const AUDIT_ARCH_X86_64 = 0xc000003e;
export const AUDIT_ARCH_I386 = 0x40000003;
export const X32_SYSCALL_BIT = 0x40000000;

export type Abi = 'x86_64' | 'i386' | 'x32';
export const ABIS: readonly Abi[] = ['x86_64', 'i386', 'x32'];

/** Which ABI a notification's (arch, nr) is; null for an arch none of the three is. */
export function abiOf(arch: number, nr: number): Abi | null {
  if (arch >>> 0 === AUDIT_ARCH_X86_64) return (nr & X32_SYSCALL_BIT) !== 0 ? 'x32' : 'x86_64';
  return arch >>> 0 === AUDIT_ARCH_I386 ? 'i386' : null;
}

/** For people: "x86_64", "i386", "x32", else the arch in hex. */
export function abiLabel(arch: number, nr: number): string {
  return abiOf(arch, nr) ?? `arch 0x${(arch >>> 0).toString(16)}`;
}

/** Each ABI's syscall names by its own number (x32's without its bit): the addon's syscallTables(). */
export type SyscallTables = Record<Abi, string[]>;

/** The syscall's name in its own ABI ("mkdir", i386's "stat64"); '' when unknown. */
export function syscallNameIn(tables: SyscallTables, arch: number, nr: number): string {
  const abi = abiOf(arch, nr);
  if (abi === null) return '';
  return tables[abi][abi === 'x32' ? nr & ~X32_SYSCALL_BIT : nr] ?? '';
}

/** `name`'s (arch, nr) in `abi` (x32: with its bit); null when that ABI has no such call. */
export function syscallNumberIn(tables: SyscallTables, abi: Abi, name: string): { arch: number; nr: number } | null {
  const nr = tables[abi].indexOf(name);
  if (nr < 0 || name === '') return null;
  return abi === 'i386' ? { arch: AUDIT_ARCH_I386, nr } : { arch: AUDIT_ARCH_X86_64, nr: abi === 'x32' ? (nr | X32_SYSCALL_BIT) >>> 0 : nr };
}

/** An ABI named by a person or a request ("" is x86_64); null when none is. */
export function parseAbi(text: string): Abi | null {
  const t = text.trim().toLowerCase();
  if (t === '' || t === 'x86_64' || t === 'amd64' || t === 'scmp_arch_x86_64') return 'x86_64';
  if (t === 'i386' || t === 'x86' || t === 'scmp_arch_x86') return 'i386';
  if (t === 'x32' || t === 'scmp_arch_x32') return 'x32';
  return null;
}
