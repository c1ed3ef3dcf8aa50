// Where the built artifacts are, from dist/test/support.
import * as path from 'node:path';

export const ROOT = path.resolve(__dirname, '..', '..', '..');
export const SECCOMP_RUN = path.join(ROOT, 'build', 'Release', 'seccomp-run');
export const NSHELPER = path.join(ROOT, 'build', 'Release', 'seccomp-nshelper');
export const BENCH_WORKLOAD = path.join(ROOT, 'build', 'Release', 'seccomp-bench-workload');
export const SOAK_WORKLOAD = path.join(ROOT, 'build', 'Release', 'seccomp-soak-workload');
export const IDLE_CLIENTS = path.join(ROOT, 'build', 'Release', 'seccomp-idle-clients');
export const SIGNAL_WORKLOAD = path.join(ROOT, 'build', 'Release', 'seccomp-signal-workload');
export const THREAD_VIEWS_WORKLOAD = path.join(ROOT, 'build', 'Release', 'seccomp-thread-views');
export const ABI_WORKLOAD = path.join(ROOT, 'build', 'Release', 'seccomp-abi-workload');
export const UFFD_WORKLOAD = path.join(ROOT, 'build', 'Release', 'seccomp-uffd-workload');

/** The agent's programs in one built tree: this one, or a previous release built beside it (test/support/release.ts). */
export interface AgentBuild {
  /** What a message calls it ("this tree", "0.1.0 (21bdedf)"). */
  label: string;
  root: string;
  dataplaneMain: string;
  controlplaneMain: string;
  keeper: string;
}

export function agentBuild(root: string, label: string): AgentBuild {
  return {
    label,
    root,
    dataplaneMain: path.join(root, 'dist', 'dataplane', 'main.js'),
    controlplaneMain: path.join(root, 'dist', 'controlplane', 'main.js'),
    keeper: path.join(root, 'build', 'Release', 'seccomp-keeper'),
  };
}

export const CURRENT_BUILD = agentBuild(ROOT, 'this tree');
export const DATAPLANE_MAIN = CURRENT_BUILD.dataplaneMain;
export const CONTROLPLANE_MAIN = CURRENT_BUILD.controlplaneMain;
export const KEEPER = CURRENT_BUILD.keeper;
export const TEST_CONTROL_PLANE = path.join(ROOT, 'dist', 'test', 'cmd', 'test-control-plane', 'main.js');
