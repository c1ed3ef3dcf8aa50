// The self-hang experiment over a list of candidate syscalls (see README.md); prints one line per
// probe and, at the end, the hanging syscalls per runtime as JSON.
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { DATAPLANE_MAIN } from '../../support/paths';
import { start, stop } from '../../support/processes';
import { probeSelfHang, type ProbeRuntime } from '../../support/self-hang';
import { waitUntil } from '../../support/wait';

/** Syscalls a runtime could make between installing the filter and handing the fd over. */
const CANDIDATES = [
  'read', 'write', 'writev', 'close', 'close_range', 'fcntl', 'dup', 'dup2', 'dup3', 'pipe2',
  'sendmsg', 'recvmsg', 'sendto', 'recvfrom', 'socket', 'connect', 'socketpair', 'getsockopt', 'setsockopt',
  'openat', 'open', 'newfstatat', 'fstat', 'statx', 'readlinkat', 'faccessat2', 'getdents64', 'lseek', 'ioctl',
  'mmap', 'munmap', 'mprotect', 'madvise', 'brk', 'futex', 'nanosleep', 'clock_nanosleep', 'sched_yield',
  'epoll_pwait', 'epoll_ctl', 'epoll_create1', 'ppoll', 'pselect6', 'rt_sigprocmask', 'rt_sigaction',
  'rt_sigreturn', 'sigaltstack', 'tgkill', 'getpid', 'getppid', 'gettid', 'getuid', 'geteuid', 'getgid',
  'capget', 'capset', 'prctl', 'setresuid', 'setresgid', 'setgroups', 'chdir', 'fchdir', 'umask',
  'clone', 'clone3', 'wait4', 'exit', 'exit_group', 'execve', 'execveat', 'kill', 'getrandom', 'keyctl',
  'mount', 'umount2', 'pivot_root', 'sethostname', 'setns', 'unshare', 'mkdir', 'mkdirat', 'uname',
  'seccomp', 'pidfd_open', 'pidfd_getfd', 'pidfd_send_signal', 'fchown', 'fchmod', 'setsid', 'setpgid', 'prlimit64',
  'getcwd', 'readlink', 'access', 'stat', 'lstat', 'poll', 'sched_getaffinity', 'set_tid_address', 'set_robust_list',
  'rseq', 'arch_prctl', 'fstatfs', 'personality', 'getpgid', 'getrlimit', 'listen', 'bind', 'accept4', 'sendmmsg',
  'rt_sigtimedwait', 'waitid',
];

async function main(): Promise<void> {
  const args = process.argv.slice(2);
  const option = (name: string) => {
    const i = args.indexOf(name);
    return i === -1 ? undefined : args.splice(i, 2)[1];
  };
  const timeoutMs = Number(option('--timeout-ms') ?? 4000);
  const noNewPrivileges = option('--no-new-privileges') !== 'false';
  const syscalls = option('--syscalls')?.split(',') ?? CANDIDATES;
  const runtimes = (args.length > 0 ? args : ['runc', 'crun']) as ProbeRuntime[];
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'seccomp-agent-self-hang-'));
  const listener = path.join(dir, 'listener.sock');
  const dataplane = start(null, process.execPath, [DATAPLANE_MAIN, '--listener-socket', listener, '--grpc-socket', path.join(dir, 'grpc', 'dataplane.sock'), '--log-level', 'warn']);
  const hanging: Record<string, string[]> = {};
  try {
    await waitUntil(() => fs.existsSync(listener), 15_000, 'the data plane\'s listener socket');
    for (const runtime of runtimes) {
      hanging[runtime] = [];
      for (const syscall of syscalls) {
        const result = await probeSelfHang(runtime, syscall, listener, dir, timeoutMs, noNewPrivileges);
        process.stdout.write(`${runtime} ${syscall.padEnd(16)} ${result.outcome.padEnd(6)} ${String(result.ms).padStart(5)} ms ${result.detail}\n`);
        if (result.outcome === 'hang') hanging[runtime].push(syscall);
      }
    }
  } finally {
    await stop(dataplane.child);
    fs.rmSync(dir, { recursive: true, force: true });
  }
  process.stdout.write(`${JSON.stringify(hanging)}\n`);
}

void main();
