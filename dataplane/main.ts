// seccomp-dataplane: owns the runtime listener socket and every container's notify fd, answers
// notifications natively (default action) or through the attached control plane.
import { AgentError } from '../common/errors';
import { createLogger } from '../common/logger';
import { helpText, parseCommandLine } from '../common/options';
import { VERSION } from '../common/version';
import { DataPlane } from './dataplane';
import { claimSocketPath, secureSocket, startGrpcServer } from './grpc-server';
import { DataPlaneMetrics } from './metrics';
import { startMetricsServer } from '../common/metrics-server';
import { loadNative, nshelperPath } from './native';
import { channelSocketPath, DATAPLANE_OPTIONS } from './options';

const SUMMARY = 'Data plane of the seccomp notify agent: receives notify fds from the OCI runtime and answers their syscalls.';

async function main(): Promise<void> {
  let parsed;
  try {
    parsed = parseCommandLine(DATAPLANE_OPTIONS, process.argv.slice(2));
  } catch (err) {
    process.stderr.write(`seccomp-dataplane: ${(err as Error).message}\n`);
    process.exit(2);
  }
  if (parsed.help) {
    process.stdout.write(`${helpText('seccomp-dataplane', SUMMARY, DATAPLANE_OPTIONS)}\n`);
    return;
  }
  if (parsed.positional.includes('version')) {
    process.stdout.write(`${VERSION}\n`);
    return;
  }
  const options = parsed.options;
  const log = createLogger('seccomp-dataplane', options.logLevel);
  const dataplane = new DataPlane(
    {
      listenerSocket: options.listenerSocket,
      channelSocket: channelSocketPath(options.grpcSocket),
      socketMode: options.socketMode,
      defaultAction: options.defaultAction,
      decisionTimeoutMs: options.decisionTimeoutMs,
    },
    log,
    loadNative(),
    nshelperPath(),
  );
  let grpcServer;
  try {
    // Both paths are checked before either is touched: a second data plane must leave a live one alone.
    await claimSocketPath(options.grpcSocket, 'gRPC socket');
    await claimSocketPath(options.listenerSocket, 'listener socket');
    await claimSocketPath(channelSocketPath(options.grpcSocket), 'decision channel socket');
    dataplane.start();
    if (options.socketGroup !== null) secureSocket(channelSocketPath(options.grpcSocket), options.socketMode, options.socketGroup);
    grpcServer = await startGrpcServer(dataplane, options.grpcSocket, options.socketMode, options.socketGroup, log);
    if (options.metricsAddr) await startMetricsServer(new DataPlaneMetrics(dataplane).registry, options.metricsAddr, log);
  } catch (err) {
    const code = err instanceof AgentError ? err.code : 'ESTART';
    log.fatal({ err, code }, `cannot start: ${(err as Error).message}`);
    dataplane.stop();
    log.flush();
    process.exitCode = 1;
    return;
  }
  log.info({ version: VERSION, pid: process.pid }, 'data plane ready');
  let stopping = false;
  const shutdown = (signal: string) => {
    if (stopping) return;
    stopping = true;
    const containers = dataplane.containers.size;
    log.warn(
      { signal, containers },
      containers > 0
        ? `stopping on ${signal}: ${containers} container notify fd(s) close, and the kernel fails their notified syscalls with ENOSYS from now on`
        : `stopping on ${signal}`,
    );
    dataplane.stop();
    void grpcServer!.close().finally(() => {
      log.flush();
      process.exit(0);
    });
  };
  process.on('SIGTERM', () => shutdown('SIGTERM'));
  process.on('SIGINT', () => shutdown('SIGINT'));
}

void main();
