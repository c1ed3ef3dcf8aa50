// test-control-plane --grpc-socket S [--control-socket C] --mode continue|errno:NAME|ignore|late:MS|bogus [--takeover]
// Attaches on the control socket (default: control.sock beside --grpc-socket).
// Prints "attached <session>" once welcomed and "decided <n>" as it goes, for tests to wait on.
import { parseErrno } from '../../../common/errors';
import { createDataPlaneClient } from '../../../common/dataplane-client';
import { controlSocketPath } from '../../../common/shared-options';
import type { AttachRequest, AttachResponse, Decision, Notification } from '../../../proto/gen/seccompagent/v1/dataplane';

const args = process.argv.slice(2);
const flag = (name: string, fallback: string) => {
  const i = args.indexOf(`--${name}`);
  return i === -1 ? fallback : args[i + 1];
};
const socket = controlSocketPath(flag('control-socket', ''), flag('grpc-socket', '/run/seccomp-agent/dataplane.sock'));
const mode = flag('mode', 'continue');
const takeover = args.includes('--takeover');

function decide(n: Notification): Decision | null {
  if (mode === 'ignore' || mode.startsWith('late:')) return null;
  if (mode === 'continue') return { handle: n.handle, id: n.id, action: { $case: 'continue', continue: {} }, findings: [] };
  if (mode === 'bogus') return { handle: n.handle, id: n.id + 1_000_000n, action: { $case: 'continue', continue: {} }, findings: [] };
  const errno = parseErrno(mode.replace(/^errno:/, ''));
  return { handle: n.handle, id: n.id, action: { $case: 'error', error: { errno } }, findings: [] };
}

const client = createDataPlaneClient(socket);
const call = client.attach();
let decided = 0;
const send = (decisions: Decision[]) => {
  if (decisions.length === 0) return;
  const request: AttachRequest = { message: { $case: 'decisions', decisions: { decisions } } };
  call.write(request);
  decided += decisions.length;
  process.stdout.write(`decided ${decided}\n`);
};
call.on('data', (response: AttachResponse) => {
  const message = response.message;
  if (message?.$case === 'welcome') process.stdout.write(`attached ${message.welcome.sessionId}\n`);
  else if (message?.$case === 'decisionRejected') process.stdout.write(`rejected ${message.decisionRejected.reason} ${message.decisionRejected.id}\n`);
  else if (message?.$case === 'notifications') {
    const batch = message.notifications.notifications;
    if (mode.startsWith('late:')) {
      const delay = Number(mode.slice(5));
      setTimeout(() => send(batch.map((n) => ({ handle: n.handle, id: n.id, action: { $case: 'continue', continue: {} }, findings: [] }))), delay);
      return;
    }
    if (mode === 'bogus') {
      // A decision for an unknown id, then the same real decision twice.
      send(batch.map((n) => decide(n)!));
      const real = batch.map((n): Decision => ({ handle: n.handle, id: n.id, action: { $case: 'error', error: { errno: 1 } }, findings: [] }));
      send(real);
      send(real);
      return;
    }
    send(batch.map(decide).filter((d): d is Decision => d !== null));
  }
});
call.on('error', (err) => {
  process.stdout.write(`stream error ${err.message}\n`);
  process.exit(3);
});
call.on('end', () => process.exit(0));
call.write({ message: { $case: 'hello', hello: { name: 'test-control-plane', version: '0.0.0', features: [], takeover } } });
process.on('SIGTERM', () => {
  call.end();
  setTimeout(() => process.exit(0), 200);
});
