import assert from 'node:assert/strict';
import { test } from 'node:test';
import { abiLabel, abiOf, AUDIT_ARCH_I386, AUDIT_ARCH_X86_64, parseAbi, syscallNameIn, syscallNumberIn, type SyscallTables } from './syscall-abi';

const tables: SyscallTables = { x86_64: [], i386: [], x32: [] };
tables.x86_64[83] = 'mkdir';
tables.i386[39] = 'mkdir';
tables.i386[195] = 'stat64';
tables.x32[83] = 'mkdir';

test('syscall ABIs: arch and the x32 bit tell x86_64, i386 and x32 apart; names and numbers per ABI', () => {
  assert.equal(abiOf(AUDIT_ARCH_X86_64, 83), 'x86_64');
  assert.equal(abiOf(AUDIT_ARCH_X86_64, 0x40000053), 'x32');
  assert.equal(abiOf(AUDIT_ARCH_I386, 39), 'i386');
  assert.equal(abiOf(0xc00000b7, 34), null);
  assert.equal(abiLabel(0xc00000b7, 34), 'arch 0xc00000b7');
  assert.equal(syscallNameIn(tables, AUDIT_ARCH_I386, 39), 'mkdir');
  assert.equal(syscallNameIn(tables, AUDIT_ARCH_X86_64, 0x40000053), 'mkdir');
  assert.equal(syscallNameIn(tables, AUDIT_ARCH_X86_64, 195), '');
  assert.deepEqual(syscallNumberIn(tables, 'x32', 'mkdir'), { arch: AUDIT_ARCH_X86_64, nr: 0x40000053 });
  assert.deepEqual(syscallNumberIn(tables, 'i386', 'stat64'), { arch: AUDIT_ARCH_I386, nr: 195 });
  assert.equal(syscallNumberIn(tables, 'x86_64', 'stat64'), null);
  assert.deepEqual(['', 'X86', 'SCMP_ARCH_X32', 'amd64', 'arm64'].map(parseAbi), ['x86_64', 'i386', 'x32', 'x86_64', null]);
});
