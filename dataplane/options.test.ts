import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parseCommandLine, parseDurationMs, parseDurationOrOffMs } from '../common/options';
import { DATAPLANE_OPTIONS } from './options';
import { errorCode } from '../test/support/agent-error';


test('options: defaults, then environment, then command line', () => {
  const defaults = parseCommandLine(DATAPLANE_OPTIONS, [], {}).options;
  assert.equal(defaults.listenerSocket, '/run/seccomp-agent.socket');
  assert.equal(defaults.grpcSocket, '/run/seccomp-agent/dataplane.sock');
  assert.equal(defaults.decisionTimeoutMs, 2000);
  assert.deepEqual(defaults.defaultAction, { kind: 'continue' });
  const env = parseCommandLine(DATAPLANE_OPTIONS, [], { SECCOMP_AGENT_GRPC_SOCKET: '/tmp/g.sock' }).options;
  assert.equal(env.grpcSocket, '/tmp/g.sock');
  const cli = parseCommandLine(DATAPLANE_OPTIONS, ['--grpc-socket=/tmp/c.sock', '--default-action', 'errno:EACCES'], { SECCOMP_AGENT_GRPC_SOCKET: '/tmp/g.sock' }).options;
  assert.equal(cli.grpcSocket, '/tmp/c.sock');
  assert.deepEqual(cli.defaultAction, { kind: 'error', errno: 13 });
  assert.ok(Object.isFrozen(cli));
});

test('options: a misspelled flag suggests the right one', () => {
  assert.throws(() => parseCommandLine(DATAPLANE_OPTIONS, ['--grpc-sockt', 'x'], {}), /unknown option --grpc-sockt \(did you mean --grpc-socket\?\)/);
  assert.equal(errorCode(() => parseCommandLine(DATAPLANE_OPTIONS, ['--zzzzzzzzzz'], {})), 'EUNKNOWN_FLAG');
});

test('options: bad values are refused with EBAD_OPTION', () => {
  assert.equal(errorCode(() => parseCommandLine(DATAPLANE_OPTIONS, ['--default-action', 'explode'], {})), 'EBAD_OPTION');
  assert.equal(errorCode(() => parseCommandLine(DATAPLANE_OPTIONS, ['--default-action', 'errno:EWHAT'], {})), 'EINVAL_ERRNO');
  assert.equal(errorCode(() => parseCommandLine(DATAPLANE_OPTIONS, ['--socket-mode', '999'], {})), 'EBAD_OPTION');
  assert.equal(errorCode(() => parseCommandLine(DATAPLANE_OPTIONS, ['--log-level', 'loud'], {})), 'EBAD_OPTION');
  assert.equal(errorCode(() => parseCommandLine(DATAPLANE_OPTIONS, ['--decision-timeout'], {})), 'EMISSING_VALUE');
});

test('options: durations', () => {
  assert.equal(parseDurationMs('250ms', 'x'), 250);
  assert.equal(parseDurationMs('2s', 'x'), 2000);
  assert.equal(parseDurationMs('1m', 'x'), 60000);
  assert.equal(parseDurationMs('15', 'x'), 15);
  assert.throws(() => parseDurationMs('0s', 'x'), /greater than zero/);
  assert.throws(() => parseDurationMs('soon', 'x'), /not a duration/);
  assert.equal(parseDurationMs('200us', 'x'), 0.2);
  assert.equal(parseDurationOrOffMs('0', 'x'), 0);
  assert.equal(parseDurationOrOffMs('0us', 'x'), 0);
  assert.equal(parseDurationOrOffMs('50us', 'x'), 0.05);
  assert.throws(() => parseDurationOrOffMs('-1', 'x'), /not a duration/);
  assert.equal(parseCommandLine(DATAPLANE_OPTIONS, [], {}).options.busyPollMs, 0.2, 'busy polling is on by default: 200 µs');
});
