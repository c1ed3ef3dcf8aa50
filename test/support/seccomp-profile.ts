// A seccomp profile file in the format containerd's CRI plugin (Localhost profiles) and Podman
// (--security-opt seccomp=FILE) read: allow everything, notify the listed syscalls to
// `listenerPath` with `listenerMetadata` (kinvolk-style KEY=VALUE lines).
import * as fs from 'node:fs';

export function writeNotifyProfile(file: string, listenerPath: string, listenerMetadata: string, syscalls: string[]): string {
  const profile = {
    defaultAction: 'SCMP_ACT_ALLOW',
    architectures: ['SCMP_ARCH_X86_64', 'SCMP_ARCH_X86', 'SCMP_ARCH_X32'],
    listenerPath,
    listenerMetadata,
    syscalls: [{ names: syscalls, action: 'SCMP_ACT_NOTIFY' }],
  };
  fs.writeFileSync(file, `${JSON.stringify(profile, null, 2)}\n`);
  return file;
}

/** The same profile without the agent: allow everything, no listener. */
export function writeAllowProfile(file: string): string {
  fs.writeFileSync(file, `${JSON.stringify({ defaultAction: 'SCMP_ACT_ALLOW', architectures: ['SCMP_ARCH_X86_64', 'SCMP_ARCH_X86', 'SCMP_ARCH_X32'], syscalls: [] }, null, 2)}\n`);
  return file;
}
