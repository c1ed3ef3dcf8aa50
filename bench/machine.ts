// The first line of every bench output: figures mean nothing without the machine they came from.
import * as fs from 'node:fs';
import * as os from 'node:os';

export interface Machine {
  kernel: string;
  arch: string;
  cpu: string;
  cores: number;
  memoryGiB: number;
  node: string;
  /** 1-minute load average when the bench started: other work on the machine skews every figure. */
  loadAverage: number;
}

export function describeMachine(): Machine {
  const cpus = os.cpus();
  return {
    kernel: `${os.type()} ${os.release()}`,
    arch: os.machine(),
    cpu: cpus[0]?.model.trim() || cpuModelFromProc(),
    cores: cpus.length,
    memoryGiB: Math.round((os.totalmem() / 2 ** 30) * 10) / 10,
    node: process.version,
    loadAverage: Math.round(os.loadavg()[0] * 100) / 100,
  };
}

export function machineLine(machine: Machine): string {
  return `machine: ${machine.kernel} ${machine.arch} | ${machine.cpu} | ${machine.cores} cores | ${machine.memoryGiB} GiB | node ${machine.node} | load ${machine.loadAverage} at start`;
}

function cpuModelFromProc(): string {
  try {
    const match = /^model name\s*:\s*(.+)$/m.exec(fs.readFileSync('/proc/cpuinfo', 'utf8'));
    return match ? match[1] : 'unknown CPU';
  } catch {
    return 'unknown CPU';
  }
}
