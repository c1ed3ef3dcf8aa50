// The planes' boundaries, read from the source: the control plane never imports the data plane
// (what they share is common/ or the proto), the data plane never imports the control plane, and
// common/ imports neither. seccompctl (ctl/) is a client of both planes: it imports only common/
// and the proto (the JSON it reads from the control plane is common/ctl-protocol.ts), and no
// plane imports it.
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { test } from 'node:test';
import { ROOT } from '../support/paths';

/** Folder -> folders its files must not import from. */
const FORBIDDEN: Record<string, string[]> = {
  controlplane: ['dataplane', 'ctl'],
  dataplane: ['controlplane', 'ctl'],
  common: ['dataplane', 'controlplane', 'ctl'],
};
/** Folder -> the only folders (besides itself) its files may import from. */
const ONLY: Record<string, string[]> = {
  ctl: ['common', 'proto'],
};

/** Whether a file of `folder` may import from the top folder `top`. */
function allowed(folder: string, top: string): boolean {
  if (top === folder) return true;
  if (ONLY[folder]) return ONLY[folder].includes(top);
  return !(FORBIDDEN[folder] ?? []).includes(top);
}

function sourceFiles(dir: string): string[] {
  const out: string[] = [];
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) out.push(...sourceFiles(full));
    else if (/\.(ts|js)$/.test(entry.name) && !entry.name.endsWith('.d.ts')) out.push(full);
  }
  return out;
}

/** Every module specifier of a file: import/export ... from, bare import, import(), require(). */
export function specifiers(source: string): string[] {
  const found: string[] = [];
  const re = /(?:\bfrom\s*|\bimport\s*|\bimport\s*\(\s*|\brequire\s*\(\s*)(['"])([^'"\n]+)\1/g;
  for (const match of source.matchAll(re)) found.push(match[2]);
  return found;
}

/** The top folder of ROOT a relative specifier of `file` lands in, or null for packages. */
function topFolderOf(file: string, specifier: string): string | null {
  if (!specifier.startsWith('.')) return null;
  const target = path.relative(ROOT, path.resolve(path.dirname(file), specifier));
  return target.split(path.sep)[0];
}

function violations(folder: string): string[] {
  const found: string[] = [];
  for (const file of sourceFiles(path.join(ROOT, folder))) {
    for (const specifier of specifiers(fs.readFileSync(file, 'utf8'))) {
      const top = topFolderOf(file, specifier);
      if (top !== null && !allowed(folder, top)) found.push(`${path.relative(ROOT, file)} imports ${specifier}`);
    }
  }
  return found;
}

test('plane boundaries: the scanner sees every form of import', () => {
  const source = [
    "import { a } from '../dataplane/a';",
    'import type { B } from "../dataplane/b";',
    "export { c } from '../dataplane/c';",
    "import '../dataplane/d';",
    "const e = require('../dataplane/e');",
    "const f = await import('../dataplane/f');",
    'import {\n  g,\n} from \'../dataplane/g\';',
  ].join('\n');
  assert.deepEqual(specifiers(source), ['a', 'b', 'c', 'd', 'e', 'f', 'g'].map((x) => `../dataplane/${x}`));
  assert.equal(topFolderOf(path.join(ROOT, 'controlplane', 'policy', 'engine.ts'), '../../dataplane/options'), 'dataplane');
  assert.equal(topFolderOf(path.join(ROOT, 'controlplane', 'main.ts'), './link/dataplane-link'), 'controlplane');
});

test('plane boundaries: ctl/ may import itself, common/ and proto/, nothing else', () => {
  assert.deepEqual(['ctl', 'common', 'proto'].filter((top) => allowed('ctl', top)), ['ctl', 'common', 'proto']);
  assert.deepEqual(['controlplane', 'dataplane', 'test', 'bench'].filter((top) => allowed('ctl', top)), []);
  assert.equal(allowed('controlplane', 'ctl'), false);
});

for (const folder of Object.keys(FORBIDDEN)) {
  test(`plane boundaries: ${folder}/ imports nothing from ${FORBIDDEN[folder].map((f) => `${f}/`).join(' or ')}`, () => {
    assert.deepEqual(violations(folder), []);
  });
}
for (const folder of Object.keys(ONLY)) {
  test(`plane boundaries: ${folder}/ imports only from ${ONLY[folder].map((f) => `${f}/`).join(' and ')}`, () => {
    assert.deepEqual(violations(folder), []);
  });
}
