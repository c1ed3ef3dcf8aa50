#!/usr/bin/env node
// Runs every compiled test file (unit *.test.js beside the code, test/integration, test/e2e)
// with node's own runner, one file at a time: the tests own real sockets, filters and runc.
'use strict';
const { spawnSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');

const dist = path.resolve(__dirname, '..', 'dist');
const tiers = process.argv.slice(2);
const files = [];
(function walk(dir) {
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) walk(full);
    else if (entry.name.endsWith('.test.js')) files.push(full);
  }
})(dist);
const selected = files
  .filter((f) => tiers.length === 0 || tiers.some((t) => path.relative(dist, f).startsWith(t)))
  .sort();
if (selected.length === 0) {
  console.error(`no test files under ${dist}${tiers.length ? ' matching ' + tiers.join(', ') : ''}`);
  process.exit(1);
}
if (process.getuid && process.getuid() !== 0) {
  console.error('the tests need root: they install seccomp filters, open pidfds and run runc');
  process.exit(1);
}
const result = spawnSync(
  process.execPath,
  ['--test', '--test-concurrency=1', '--test-timeout=900000', ...selected],
  { stdio: 'inherit' },
);
process.exit(result.status === null ? 1 : result.status);
