// Which test files make up each tier, and which of them this user may run. Plain JS, read by
// test/run.js before anything is built; test/unit/tiers.test.ts checks the rules.
//   unit         *.test.ts beside the code and test/unit/: no root, no kernel feature, no runtime
//   integration  test/integration/: the real processes, filters and sockets (root)
//   e2e          test/e2e/: the real OCI runtimes (root)
'use strict';
const fs = require('node:fs');
const path = require('node:path');

const TIERS = ['unit', 'integration', 'e2e'];
/** Tiers that need root: seccomp filters on other users' processes, pidfds, cgroups, runc. */
const ROOT_TIERS = new Set(['integration', 'e2e']);
/** Source folders holding tests (tsconfig.json's include, less the generated code). */
const SOURCE_DIRS = ['common', 'dataplane', 'controlplane', 'ctl', 'test', 'bench'];

function tierOf(relative) {
  const parts = relative.split(path.sep);
  if (parts[0] === 'test' && parts[1] === 'integration') return 'integration';
  if (parts[0] === 'test' && parts[1] === 'e2e') return 'e2e';
  return 'unit';
}

/** Every test of the source tree: { source, compiled, tier }, sorted; the compiled file may be missing. */
function listTests(root) {
  const found = [];
  const walk = (dir) => {
    if (!fs.existsSync(dir)) return;
    for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
      const full = path.join(dir, entry.name);
      if (entry.isDirectory()) walk(full);
      else if (entry.name.endsWith('.test.ts')) {
        const source = path.relative(root, full);
        found.push({ source, compiled: path.join(root, 'dist', source.replace(/\.ts$/, '.js')), tier: tierOf(source) });
      }
    }
  };
  for (const dir of SOURCE_DIRS) walk(path.join(root, dir));
  return found.sort((a, b) => a.source.localeCompare(b.source));
}

/**
 * What to run for `args` (tier names, or paths of folders and files, source or dist) as `uid`.
 * Returns { runs: [{ tier, files }], notice } or { error }. No argument: every tier as root, the
 * unit tier alone otherwise (said in `notice`). A tier that needs root, asked for by a user who is
 * not root, is an error: nothing is skipped quietly.
 */
function plan(tests, args, uid) {
  const isRoot = uid === 0;
  let selected;
  let notice = '';
  if (args.length === 0) {
    selected = isRoot ? tests : tests.filter((t) => !ROOT_TIERS.has(t.tier));
    if (!isRoot) notice = 'not root: running the unit tier only; the integration and e2e tiers need root (sudo npm test runs every tier)';
  } else {
    selected = [];
    for (const arg of args) {
      const prefix = path.normalize(arg).replace(/^dist\//, '').replace(/\.js$/, '.ts').replace(/\/$/, '');
      const matches = TIERS.includes(arg)
        ? tests.filter((t) => t.tier === arg)
        : tests.filter((t) => t.source === prefix || t.source.startsWith(`${prefix}/`));
      if (matches.length === 0) return { error: `no test files match "${arg}" (tiers: ${TIERS.join(', ')}, or a folder or file of tests)` };
      for (const m of matches) if (!selected.includes(m)) selected.push(m);
    }
    const needRoot = [...new Set(selected.filter((t) => ROOT_TIERS.has(t.tier)).map((t) => t.tier))];
    if (!isRoot && needRoot.length > 0) {
      return { error: `the ${needRoot.join(' and ')} tier${needRoot.length > 1 ? 's need' : ' needs'} root (seccomp filters, pidfds, cgroups, runc): run as root, or ask for the unit tier only` };
    }
  }
  const runs = TIERS.map((tier) => ({ tier, files: selected.filter((t) => t.tier === tier) })).filter((r) => r.files.length > 0);
  return { runs, notice };
}

module.exports = { TIERS, listTests, plan, tierOf };
