// A temp folder per test, removed with everything in it when the test ends, pass or fail.
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import type { TestContext } from 'node:test';

export function scratchDir(t: TestContext, prefix = 'seccomp-agent-test-'): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
  // Hooks run in the order they were added, so this one may run while a process the test started
  // (a keeper's data plane restarting) still puts a socket here: retried, and never thrown, since a
  // hook that throws would leave the hooks after it (the ones that stop those processes) unrun.
  t.after(() => {
    try {
      fs.rmSync(dir, { recursive: true, force: true, maxRetries: 10, retryDelay: 100 });
    } catch (err) {
      process.stderr.write(`scratch folder ${dir} not removed: ${(err as Error).message}\n`);
    }
  });
  return dir;
}
