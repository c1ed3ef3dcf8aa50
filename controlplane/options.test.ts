import assert from 'node:assert/strict';
import * as os from 'node:os';
import { test } from 'node:test';
import { helpText, parseCommandLine } from '../common/options';
import { CONTROLPLANE_OPTIONS } from './options';
import { errorCode } from '../test/support/agent-error';


test('controlplane options: defaults', () => {
  const o = parseCommandLine(CONTROLPLANE_OPTIONS, [], {}).options;
  assert.equal(o.grpcSocket, '/run/seccomp-agent/dataplane.sock');
  assert.equal(o.kubeconfig, '');
  assert.equal(o.nodeName, os.hostname());
  assert.equal(o.noKubernetes, false);
  assert.deepEqual(o.unresolvedAction, { kind: 'continue' });
  assert.equal(o.metricsAddr, null);
  assert.equal(o.logLevel, 'info');
  assert.equal(o.resyncPeriodMs, 300_000);
  assert.equal(o.reconnectMaxMs, 10_000);
  assert.equal(o.controlSocket, '', 'control.sock beside --grpc-socket (controlSocketPath)');
  assert.equal(o.resumeGraceMs, 30_000);
  assert.equal(parseCommandLine(CONTROLPLANE_OPTIONS, ['--resume-grace', '0'], {}).options.resumeGraceMs, 0, '0: idle at once');
  assert.ok(Object.isFrozen(o));
});

test('controlplane options: environment, then command line', () => {
  const env = {
    SECCOMP_AGENT_GRPC_SOCKET: '/tmp/e.sock',
    KUBECONFIG: '/etc/kube.conf',
    NODE_NAME: 'node-7',
    SECCOMP_AGENT_NO_KUBERNETES: 'true',
    SECCOMP_AGENT_UNRESOLVED_ACTION: 'errno:EPERM',
  };
  const fromEnv = parseCommandLine(CONTROLPLANE_OPTIONS, [], env).options;
  assert.equal(fromEnv.grpcSocket, '/tmp/e.sock');
  assert.equal(fromEnv.kubeconfig, '/etc/kube.conf');
  assert.equal(fromEnv.nodeName, 'node-7');
  assert.equal(fromEnv.noKubernetes, true);
  assert.deepEqual(fromEnv.unresolvedAction, { kind: 'error', errno: 1 });
  const cli = parseCommandLine(
    CONTROLPLANE_OPTIONS,
    ['--node-name', 'node-8', '--unresolved-action=errno:EACCES', '--resync-period', '30s', '--reconnect-max', '2s', '--metrics-addr', ':9465', '--no-kubernetes=false'],
    env,
  ).options;
  assert.equal(cli.nodeName, 'node-8');
  assert.deepEqual(cli.unresolvedAction, { kind: 'error', errno: 13 });
  assert.equal(cli.resyncPeriodMs, 30_000);
  assert.equal(cli.reconnectMaxMs, 2_000);
  assert.deepEqual(cli.metricsAddr, { host: '127.0.0.1', port: 9465 });
  assert.equal(cli.noKubernetes, false);
});

test('controlplane options: bad values and misspelled flags are refused', () => {
  assert.equal(errorCode(() => parseCommandLine(CONTROLPLANE_OPTIONS, ['--unresolved-action', 'kill'], {})), 'EBAD_OPTION');
  assert.equal(errorCode(() => parseCommandLine(CONTROLPLANE_OPTIONS, ['--unresolved-action', 'errno:ENOPE'], {})), 'EINVAL_ERRNO');
  assert.equal(errorCode(() => parseCommandLine(CONTROLPLANE_OPTIONS, ['--resync-period', 'soon'], {})), 'EBAD_OPTION');
  assert.equal(errorCode(() => parseCommandLine(CONTROLPLANE_OPTIONS, ['--no-kubernetes=maybe'], {})), 'EBAD_OPTION');
  assert.throws(() => parseCommandLine(CONTROLPLANE_OPTIONS, ['--node-nmae', 'x'], {}), /did you mean --node-name\?/);
});

test('controlplane options: --help lists every flag with its environment variable', () => {
  const text = helpText('seccomp-controlplane', 'policy', CONTROLPLANE_OPTIONS);
  for (const flag of ['--grpc-socket', '--kubeconfig', '--node-name', '--no-kubernetes', '--unresolved-action', '--resync-period', '--reconnect-max']) {
    assert.match(text, new RegExp(flag));
  }
  assert.match(text, /env KUBECONFIG/);
  assert.match(text, /env NODE_NAME/);
});
