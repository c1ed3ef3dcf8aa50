// The smallest control plane there is: attach, say hello, and answer every NotificationBatch
// with one DecisionBatch of `continue`. Scenario (c) runs it as its own process, as a real
// control plane would be:
//   node dist/bench/continue-control-plane.js --grpc-socket PATH
// It prints {"attached":SESSION} once welcomed and {"decisions":N,...} on SIGTERM.
import * as grpc from '@grpc/grpc-js';
import { VERSION } from '../common/version';
import {
  DataPlaneClient,
  type AttachRequest,
  type AttachResponse,
  type Decision,
} from '../proto/gen/seccompagent/v1/dataplane';

export interface ContinueControlPlane {
  readonly stats: { decisions: number; batches: number; rejected: number };
  /** Resolves with the session id once the data plane welcomed us. */
  readonly attached: Promise<string>;
  /** Resolves when the stream ends, with its error if it ended badly. */
  readonly ended: Promise<Error | null>;
  close(): void;
}

export function attachContinueControlPlane(grpcSocket: string, name = 'bench-continue'): ContinueControlPlane {
  const client = new DataPlaneClient(`unix://${grpcSocket}`, grpc.credentials.createInsecure());
  const call = client.attach();
  const stats = { decisions: 0, batches: 0, rejected: 0 };
  let onAttached: (session: string) => void = () => {};
  let onNotAttached: (err: Error) => void = () => {};
  const attached = new Promise<string>((resolve, reject) => {
    onAttached = resolve;
    onNotAttached = reject;
  });
  const ended = new Promise<Error | null>((resolve) => {
    call.on('error', (err: Error) => {
      onNotAttached(err);
      resolve(err);
    });
    call.on('end', () => {
      onNotAttached(new Error('the data plane ended the Attach stream'));
      resolve(null);
    });
  });
  attached.catch(() => {});
  call.on('data', (response: AttachResponse) => {
    const message = response.message;
    if (message === undefined) return;
    switch (message.$case) {
      case 'welcome':
        onAttached(message.welcome.sessionId);
        break;
      case 'notifications': {
        const decisions: Decision[] = message.notifications.notifications.map((n) => ({
          handle: n.handle,
          id: n.id,
          action: { $case: 'continue', continue: {} },
        }));
        const request: AttachRequest = { message: { $case: 'decisions', decisions: { decisions } } };
        call.write(request);
        stats.decisions += decisions.length;
        stats.batches++;
        break;
      }
      case 'decisionRejected':
        stats.rejected++;
        break;
      default:
        break;
    }
  });
  call.write({ message: { $case: 'hello', hello: { name, version: VERSION, features: [], takeover: false } } });
  return {
    stats,
    attached,
    ended,
    close: () => {
      call.end();
      client.close();
    },
  };
}

function main(): void {
  const index = process.argv.indexOf('--grpc-socket');
  const socket = index > 0 ? process.argv[index + 1] : undefined;
  if (!socket) {
    process.stderr.write('usage: continue-control-plane --grpc-socket PATH\n');
    process.exit(2);
  }
  const controlPlane = attachContinueControlPlane(socket);
  controlPlane.attached.then(
    (session) => process.stdout.write(`${JSON.stringify({ attached: session })}\n`),
    (err: Error) => {
      process.stderr.write(`continue-control-plane: not attached: ${err.message}\n`);
      process.exit(1);
    },
  );
  void controlPlane.ended.then((err) => {
    process.stderr.write(`continue-control-plane: stream ended${err ? `: ${err.message}` : ''}\n`);
    process.exit(1);
  });
  const stop = () => {
    process.stdout.write(`${JSON.stringify(controlPlane.stats)}\n`, () => process.exit(0));
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
}

if (require.main === module) main();
