import assert from 'node:assert/strict';
import * as os from 'node:os';
import { test } from 'node:test';
import { parseCommandLine, parseDurationMs, parseDurationOrOffMs } from '../common/options';
import { DATAPLANE_OPTIONS } from './options';
import { controlSocketPath } from '../common/shared-options';
import { errorCode } from '../test/support/agent-error';


test('options: defaults, then environment, then command line', () => {
  const defaults = parseCommandLine(DATAPLANE_OPTIONS, [], {}).options;
  assert.deepEqual(defaults.listenerSockets, ['/run/seccomp-agent.socket']);
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

test('options: --listener-socket is repeatable, and its env var holds a comma-separated list', () => {
  const spo = '/var/run/security-profiles-operator/seccomp-agent.sock';
  const cli = parseCommandLine(DATAPLANE_OPTIONS, ['--listener-socket', '/run/seccomp-agent.socket', `--listener-socket=${spo}`], {}).options;
  assert.deepEqual(cli.listenerSockets, ['/run/seccomp-agent.socket', spo]);
  const env = parseCommandLine(DATAPLANE_OPTIONS, [], { SECCOMP_AGENT_LISTENER_SOCKET: `/run/seccomp-agent.socket, ${spo}` }).options;
  assert.deepEqual(env.listenerSockets, ['/run/seccomp-agent.socket', spo]);
  // The command line replaces the environment's list as a whole.
  const both = parseCommandLine(DATAPLANE_OPTIONS, ['--listener-socket', '/tmp/a.sock'], { SECCOMP_AGENT_LISTENER_SOCKET: spo }).options;
  assert.deepEqual(both.listenerSockets, ['/tmp/a.sock']);
  assert.equal(errorCode(() => parseCommandLine(DATAPLANE_OPTIONS, ['--listener-socket', 'relative.sock'], {})), 'EBAD_OPTION');
  assert.equal(errorCode(() => parseCommandLine(DATAPLANE_OPTIONS, ['--listener-socket', '/a.sock', '--listener-socket', '/a.sock'], {})), 'EBAD_OPTION');
  assert.equal(errorCode(() => parseCommandLine(DATAPLANE_OPTIONS, [], { SECCOMP_AGENT_LISTENER_SOCKET: ' , ' })), 'EBAD_OPTION');
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

test('options: the control socket defaults to control.sock beside --grpc-socket, root only; Watch caps', () => {
  const defaults = parseCommandLine(DATAPLANE_OPTIONS, [], {}).options;
  assert.equal(controlSocketPath(defaults.controlSocket, defaults.grpcSocket), '/run/seccomp-agent/control.sock');
  assert.equal(defaults.controlSocketGroup, null, 'no group: 0600 root');
  assert.deepEqual([defaults.maxWatchers, defaults.maxWatchersPerConnection], [64, 8]);
  const moved = parseCommandLine(DATAPLANE_OPTIONS, ['--grpc-socket', '/tmp/x/o.sock'], {}).options;
  assert.equal(controlSocketPath(moved.controlSocket, moved.grpcSocket), '/tmp/x/control.sock', 'beside a moved observer socket');
  const set = parseCommandLine(DATAPLANE_OPTIONS, ['--control-socket=/tmp/c.sock', '--control-socket-group', 'ops', '--max-watchers', '3'], { SECCOMP_AGENT_MAX_WATCHERS_PER_CONNECTION: '2' }).options;
  assert.equal(controlSocketPath(set.controlSocket, set.grpcSocket), '/tmp/c.sock');
  assert.equal(set.controlSocketGroup, 'ops');
  assert.deepEqual([set.maxWatchers, set.maxWatchersPerConnection], [3, 2]);
  assert.equal(errorCode(() => parseCommandLine(DATAPLANE_OPTIONS, ['--max-watchers', '0'], {})), 'EBAD_OPTION');
});

test('options: --engine-threads is auto (one per CPU, at most 4) or a count from 1 to 64', () => {
  const auto = parseCommandLine(DATAPLANE_OPTIONS, [], {}).options.engineThreads;
  assert.equal(auto, Math.min(os.availableParallelism(), 4));
  assert.equal(parseCommandLine(DATAPLANE_OPTIONS, ['--engine-threads', '1'], {}).options.engineThreads, 1);
  assert.equal(parseCommandLine(DATAPLANE_OPTIONS, [], { SECCOMP_AGENT_ENGINE_THREADS: '64' }).options.engineThreads, 64);
  for (const bad of ['0', '65', '-1', '2.5', 'many', '']) {
    assert.equal(errorCode(() => parseCommandLine(DATAPLANE_OPTIONS, [`--engine-threads=${bad}`], {})), 'EBAD_OPTION', bad);
  }
});
