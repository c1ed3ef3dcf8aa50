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
  };
}

export function machineLine(machine: Machine): string {
  return `machine: ${machine.kernel} ${machine.arch} | ${machine.cpu} | ${machine.cores} cores | ${machine.memoryGiB} GiB | node ${machine.node}`;
}

function cpuModelFromProc(): string {
  try {
    const match = /^model name\s*:\s*(.+)$/m.exec(fs.readFileSync('/proc/cpuinfo', 'utf8'));
    return match ? match[1] : 'unknown CPU';
  } catch {
    return 'unknown CPU';
  }
}
