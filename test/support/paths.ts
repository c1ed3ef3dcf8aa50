// Where the built artifacts are, from dist/test/support.
import * as path from 'node:path';

export const ROOT = path.resolve(__dirname, '..', '..', '..');
export const SECCOMP_RUN = path.join(ROOT, 'build', 'Release', 'seccomp-run');
export const NSHELPER = path.join(ROOT, 'build', 'Release', 'seccomp-nshelper');
export const BENCH_WORKLOAD = path.join(ROOT, 'build', 'Release', 'seccomp-bench-workload');
export const KEEPER = path.join(ROOT, 'build', 'Release', 'seccomp-keeper');
export const SOAK_WORKLOAD = path.join(ROOT, 'build', 'Release', 'seccomp-soak-workload');
export const IDLE_CLIENTS = path.join(ROOT, 'build', 'Release', 'seccomp-idle-clients');
export const SIGNAL_WORKLOAD = path.join(ROOT, 'build', 'Release', 'seccomp-signal-workload');
export const DATAPLANE_MAIN = path.join(ROOT, 'dist', 'dataplane', 'main.js');
export const CONTROLPLANE_MAIN = path.join(ROOT, 'dist', 'controlplane', 'main.js');
export const TEST_CONTROL_PLANE = path.join(ROOT, 'dist', 'test', 'cmd', 'test-control-plane', 'main.js');
