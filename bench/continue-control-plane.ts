// The smallest control plane there is: the real DataPlaneLink (Attach, the decision channel
// unless --no-channel) with a policy that continues everything. Scenario (c) runs it as its own
// process, as a real control plane would be:
//   node dist/bench/continue-control-plane.js --grpc-socket PATH --control-socket PATH [--no-channel] [--busy-poll DURATION]
// It prints {"attached":SESSION} once welcomed and {"decisions":N,...} on SIGTERM.
import { createLogger } from '../common/logger';
import { parseDurationOrOffMs } from '../common/options';
import { DataPlaneLink } from '../controlplane/link/dataplane-link';
import { SHARED_OPTIONS } from '../common/shared-options';

/** --busy-poll DURATION, default the planes' own (SHARED_OPTIONS). */
function busyPollMs(): number {
  return parseDurationOrOffMs(argument('busy-poll') ?? SHARED_OPTIONS.busyPollMs.default, 'busy-poll');
}

/** The value of `--NAME VALUE`, or undefined. */
function argument(name: string): string | undefined {
  const index = process.argv.indexOf(`--${name}`);
  return index > 0 ? process.argv[index + 1] : undefined;
}

function main(): void {
  const socket = argument('grpc-socket');
  const controlSocket = argument('control-socket');
  if (!socket || !controlSocket) {
    process.stderr.write('usage: continue-control-plane --grpc-socket PATH --control-socket PATH [--no-channel]\n');
    process.exit(2);
  }
  const link = new DataPlaneLink(
    { grpcSocket: socket, controlSocket, name: 'bench-continue', features: ['decision.continue'], reconnectMaxMs: 1000, channel: !process.argv.includes('--no-channel'), busyPollMs: busyPollMs() },
    {
      knows: () => true,
      onSnapshot: () => undefined,
      onContainerAdded: () => undefined,
      onContainerRemoved: () => undefined,
      decide: (n) => ({ handle: n.handle, id: n.id, action: { $case: 'continue', continue: {} }, findings: [] }),
    },
    createLogger('bench-continue', 'warn'),
  );
  link.once('welcome', (welcome: { sessionId: string }) => process.stdout.write(`${JSON.stringify({ attached: welcome.sessionId })}\n`));
  link.on('state', (state: string) => {
    if (state === 'disconnected') {
      process.stderr.write('continue-control-plane: the Attach session ended\n');
      process.exit(1);
    }
  });
  link.start();
  const stop = () => {
    const stats = { decisions: link.decisionsSent, batches: link.batchesSent, rejected: link.decisionsRejected };
    process.stdout.write(`${JSON.stringify(stats)}\n`, () => process.exit(0));
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
}

main();
