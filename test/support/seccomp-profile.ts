// A seccomp profile file in the format containerd's CRI plugin (Localhost profiles) and Podman
// (--security-opt seccomp=FILE) read: allow everything, notify the listed syscalls to
// `listenerPath` with `listenerMetadata` (kinvolk-style KEY=VALUE lines).
import * as fs from 'node:fs';
import { SHIPPED_LISTENER_SOCKETS } from '../../common/shared-options';
import type { LintFinding, SeccompSection } from '../../common/profile/lint';

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

/** The listener path of cleanLintProfile: one the shipped profiles use. */
export const CLEAN_LINT_SOCKET = SHIPPED_LISTENER_SOCKETS[0];

/** A profile the linter finds clean: notify mkdir and mkdirat, x86_64 only, io_uring denied, no emulation key. */
export function cleanLintProfile(over: Partial<SeccompSection> = {}): SeccompSection {
  return {
    defaultAction: 'SCMP_ACT_ALLOW',
    architectures: ['SCMP_ARCH_X86_64'],
    listenerPath: CLEAN_LINT_SOCKET,
    listenerMetadata: '',
    syscalls: [
      { names: ['mkdir', 'mkdirat'], action: 'SCMP_ACT_NOTIFY' },
      { names: ['io_uring_setup', 'io_uring_enter', 'io_uring_register'], action: 'SCMP_ACT_ERRNO' },
    ],
    ...over,
  };
}

/** Findings as "severity rule", for comparing. */
export const lintRules = (findings: LintFinding[]): string[] => findings.map((f) => `${f.severity} ${f.rule}`);
