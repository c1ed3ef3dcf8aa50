// watch-flood --grpc-socket S --streams N
// Opens N Watch streams on ONE HTTP/2 connection (one channel, one subchannel) and never reads
// them: no 'data' listener, so grpc-js never pulls their messages and HTTP/2 flow control fills.
// Prints "opened N" and then "ended K CODE" as the data plane ends or refuses streams (their
// status is read even while their messages are not); waits to be killed.
import * as grpc from '@grpc/grpc-js';
import { createDataPlaneClient } from '../../../common/dataplane-client';

const args = process.argv.slice(2);
const flag = (name: string, fallback: string) => {
  const i = args.indexOf(`--${name}`);
  return i === -1 ? fallback : args[i + 1];
};
const client = createDataPlaneClient(flag('grpc-socket', '/run/seccomp-agent/dataplane.sock'));
const streams = Number(flag('streams', '500'));
const ended = new Map<string, number>();
let report: NodeJS.Timeout | null = null;
for (let i = 0; i < streams; i++) {
  const call = client.watch({ containerIds: [], syscalls: [] });
  call.on('status', (s: grpc.StatusObject) => {
    const code = grpc.status[s.code];
    ended.set(code, (ended.get(code) ?? 0) + 1);
    report ??= setTimeout(() => {
      report = null;
      for (const [c, n] of ended) process.stdout.write(`ended ${n} ${c}\n`);
    }, 200);
  });
  call.on('error', () => undefined);
}
process.stdout.write(`opened ${streams}\n`);
setInterval(() => undefined, 1 << 30);
