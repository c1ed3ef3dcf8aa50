// Where the native parts built by node-gyp are, and loading an addon from there.
import * as path from 'node:path';

const ROOT = path.resolve(__dirname, '..', '..');

/** A file node-gyp built (build/Release). */
export function builtPath(file: string): string {
  return path.join(ROOT, 'build', 'Release', file);
}

/** Loads `file` (a .node) from build/Release, else build/Debug; the error lists every path tried. */
export function loadBuiltAddon(file: string): unknown {
  const failures: string[] = [];
  for (const candidate of ['Release', 'Debug'].map((dir) => path.join(ROOT, 'build', dir, file))) {
    try {
      // eslint-disable-next-line @typescript-eslint/no-require-imports
      return require(candidate);
    } catch (err) {
      failures.push(`${candidate}: ${(err as Error).message.split('\n')[0]}`);
    }
  }
  throw new Error(`cannot load ${file}; tried:\n  ${failures.join('\n  ')}\nrun "npm ci" (node-gyp) to build it`);
}
