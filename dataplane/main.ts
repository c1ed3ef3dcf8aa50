// seccomp-dataplane: owns the runtime listener socket and every container's notify fd, answers
// notifications natively (default action) or through the attached control plane. Its containers
// come from the runtime, from the fd store after a restart (LISTEN_FDS), or from the data plane it
// takes over from (--takeover); see docs/operators.md.
import './young-generation';
import { AgentError } from '../common/errors';
import { createLogger, type Logger } from '../common/logger';
import { helpText, parseCommandLine } from '../common/options';
import { VERSION } from '../common/version';
import { DataPlane } from './dataplane';
import { claimSocketPath, createGrpcServer, secureSocket, type GrpcServerHandle } from './grpc-server';
import { acknowledgeHandoff, HandoffServer, receiveHandoff, watchPredecessorExit, type TakenOver } from './handoff';
import { FD_STORE_HEALTH_SERVICE } from './fd-store-watch';
import { KeeperRecovery, readKeeperCommandLine } from './keeper-recovery';
import { loadNative, nshelperPath, type NativeAddon } from './native';
import { channelSocketPath, DATAPLANE_OPTIONS, handoffSocketPath } from './options';
import { controlSocketPath } from '../common/shared-options';

const SUMMARY = 'Data plane of the seccomp notify agent: receives notify fds from the OCI runtime and answers their syscalls.';

/** Tells systemd or seccomp-keeper (when either started us); a failure to tell is only logged. */
function notifySupervisor(addon: NativeAddon, log: Logger, message: string): void {
  try {
    addon.sdNotify(message);
  } catch (err) {
    log.warn({ err }, `cannot notify the supervisor ($NOTIFY_SOCKET): ${(err as Error).message}`);
  }
}

/**
 * The fd store's loss goes to health (service "fd-store" NOT_SERVING; "" stays SERVING, as the
 * data plane still answers every syscall) and, under a keeper and unless turned off, starts a
 * keeper again (keeper-recovery.ts). The keeper's command line is read now, while it lives.
 */
function prepareKeeperRecovery(dp: DataPlane, server: GrpcServerHandle, enabled: boolean, log: Logger, stopping: () => boolean): KeeperRecovery | null {
  const store = dp.fdStore;
  const setHealth = () => server.health.setStatus(FD_STORE_HEALTH_SERVICE, store.up ? 'SERVING' : 'NOT_SERVING');
  setHealth();
  store.onChange = setHealth;
  let recovery: KeeperRecovery | null = null;
  let unavailable = '--keeper-recovery=false: nothing restarts it; hand over to a data plane under a keeper (--takeover) to be covered again';
  if (enabled && store.holderPid > 0) {
    const commandLine = readKeeperCommandLine(store.holderPid);
    if ('error' in commandLine) unavailable = `no recovery: ${commandLine.error}`;
    else {
      recovery = new KeeperRecovery(commandLine, log);
      recovery.onProgress = (detail) => store.update(detail);
    }
  }
  store.onLost = () => {
    if (stopping()) return 'this data plane is stopping anyway';
    return recovery ? recovery.begin() : unavailable;
  };
  return recovery;
}

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
  const addon = loadNative();
  const channelSocket = channelSocketPath(options.grpcSocket);
  const controlSocket = controlSocketPath(options.controlSocket, options.grpcSocket);
  // The control role (Attach, the decision channel): root only, or a group given it on purpose.
  const controlMode = options.controlSocketGroup === null ? 0o600 : 0o660;
  const handoffSocket = handoffSocketPath(options.grpcSocket);
  let dataplane: DataPlane | null = null;
  let grpcServer: GrpcServerHandle | null = null;
  let recovery: KeeperRecovery | null = null;
  let stopping = false;
  let predecessorGone: Promise<void> = Promise.resolve();
  try {
    dataplane = new DataPlane(
      {
        listenerSockets: options.listenerSockets,
        channelSocket,
        socketMode: options.socketMode,
        channelSocketMode: controlMode,
        maxWatchers: options.maxWatchers,
        maxWatchersPerConnection: options.maxWatchersPerConnection,
        defaultAction: options.defaultAction,
        decisionTimeoutMs: options.decisionTimeoutMs,
        busyPollMs: options.busyPollMs,
        engineThreads: options.engineThreads,
        controlPlaneGraceMs: options.controlPlaneGraceMs,
      },
      log,
      addon,
      nshelperPath(),
    );
    grpcServer = createGrpcServer(dataplane, log, controlSocket);
    recovery = prepareKeeperRecovery(dataplane, grpcServer, options.keeperRecovery, log, () => stopping);
    // A restart under systemd or seccomp-keeper: the store gives back everything, whatever the flags.
    const stored = addon.takeListenFds();
    let taken: TakenOver | null = null;
    if (stored.length > 0) {
      dataplane.restore(stored, 'fd-store');
    } else if (options.takeover) {
      const asked = process.hrtime.bigint();
      taken = receiveHandoff(addon, handoffSocket);
      const received = process.hrtime.bigint();
      if (taken) dataplane.restore(taken.fds, 'handoff');
      if (taken) log.info({ receiveMs: Number(received - asked) / 1e6, restoreMs: Number(process.hrtime.bigint() - received) / 1e6, fds: taken.fds.length }, 'handoff received and restored');
      else log.info({ handoffSocket }, '--takeover: no data plane serves the handoff socket; starting fresh');
    }
    if (!taken) {
      // Every path is checked before any is touched: a second data plane must leave a live one alone.
      await claimSocketPath(options.grpcSocket, 'gRPC observer socket');
      await claimSocketPath(controlSocket, 'gRPC control socket');
      for (const socket of dataplane.listenersToCreate()) await claimSocketPath(socket, 'listener socket');
      await claimSocketPath(channelSocket, 'decision channel socket');
      await claimSocketPath(handoffSocket, 'handoff socket');
    }
    // A listener the predecessor did not serve (one added to --listener-socket with this upgrade):
    // its path may hold the predecessor's stale socket file only; a live one is refused.
    if (taken) for (const socket of dataplane.listenersToCreate()) await claimSocketPath(socket, 'listener socket');
    const created = dataplane.listenersToCreate();
    dataplane.start(); // answers from here on
    // --socket-group is the listeners' group too (its --help says so): runtimes in that group connect.
    // The engine bound them with --socket-mode and group root; a restored listener keeps what it had.
    if (options.socketGroup !== null) for (const socket of created) secureSocket(socket, options.socketMode, options.socketGroup);
    if (taken) acknowledgeHandoff(addon, taken); // the pause ends: the engine answers them all
    dataplane.adoptRestored();
    if (taken) {
      // The old one answers nothing any more and never unlinks a path: take them over now, so its
      // control plane finds this data plane on its first reconnect.
      for (const [socket, what] of [[options.grpcSocket, 'gRPC observer socket'], [controlSocket, 'gRPC control socket'], [channelSocket, 'decision channel socket'], [handoffSocket, 'handoff socket']]) {
        await claimSocketPath(socket!, what!, true);
      }
      predecessorGone = watchPredecessorExit(addon, taken, log);
    }
    dataplane.listenLocalSockets(handoffSocket);
    if (options.controlSocketGroup !== null) secureSocket(channelSocket, controlMode, options.controlSocketGroup, 'control-socket-group');
    await grpcServer.listen(
      { path: options.grpcSocket, mode: options.socketMode, group: options.socketGroup, groupFlag: 'socket-group' },
      { path: controlSocket, mode: controlMode, group: options.controlSocketGroup, groupFlag: 'control-socket-group' },
    );
    const metricsAddr = options.metricsAddr;
    if (metricsAddr) {
      // Loaded only when metrics are served: prom-client is a tenth of an idle data plane's memory.
      const { DataPlaneMetrics } = await import('./metrics');
      const { startMetricsServer } = await import('../common/metrics-server');
      const registry = new DataPlaneMetrics(dataplane).registry;
      if (taken) {
        // The predecessor holds the port until it exits when both share a network namespace (a
        // keeper's recovery, hostNetwork). After a takeover, failing to start would drop every
        // container just taken: metrics wait for it, and a failure is only logged.
        void predecessorGone
          .then(() => startMetricsServer(registry, metricsAddr, log))
          .catch((err: Error) => log.error({ err }, `metrics not served (${err.message}); the data plane goes on without them`));
      } else {
        await startMetricsServer(registry, metricsAddr, log);
      }
    }
  } catch (err) {
    const code = err instanceof AgentError ? err.code : 'ESTART';
    log.fatal({ err, code }, `cannot start: ${(err as Error).message}`);
    dataplane?.stop();
    log.flush();
    process.exitCode = 1;
    return;
  }
  const dp = dataplane;
  const server = grpcServer!;
  log.info({ version: VERSION, pid: process.pid }, 'data plane ready');
  notifySupervisor(addon, log, `READY=1\nSTATUS=serving ${dp.containers.size} container(s)\nMAINPID=${process.pid}`);
  const exit = () => {
    log.flush();
    process.exit(0);
  };
  const handoff = new HandoffServer(dp, addon, log, async () => {
    stopping = true;
    // A lost keeper (the recovery's handoff) hears nothing any more.
    if (!dp.fdStore.lost) notifySupervisor(addon, log, 'STOPPING=1\nSTATUS=handed over');
    // Exit at once, closing nothing by hand: the successor takes the sockets when this process is
    // gone (the handoff connection's EOF), and every moment until then is one its control plane
    // spends reconnecting. No server.close(): it would unlink the gRPC socket path on its way out.
    exit();
  });
  dp.onHandoffRequest = (conn, peerPid) => {
    if (stopping) addon.closeFd(conn);
    else void handoff.handle(conn, peerPid);
  };
  const shutdown = (signal: string) => {
    if (stopping) return;
    stopping = true;
    const containers = dp.containers.size;
    const stored = dp.status().fdStore;
    log.warn(
      { signal, containers, fdStore: stored },
      containers === 0
        ? `stopping on ${signal}`
        : stored
          ? `stopping on ${signal}: the fd store keeps the notify fds of ${containers} container(s); their notified syscalls wait until the data plane is started again (systemd and seccomp-keeper restart it; a keeper that is itself stopping releases them)`
          : `stopping on ${signal}: ${containers} container notify fd(s) close, and the kernel fails their notified syscalls with ENOSYS from now on`,
    );
    // No STOPPING=1: seccomp-keeper reads "STOPPING=1, exit 0" as "handed over" and would not
    // restart us; a SIGTERM that did not come through it is a restart, as under systemd.
    recovery?.cancel();
    dp.stop();
    void server.close().finally(exit);
  };
  process.on('SIGTERM', () => shutdown('SIGTERM'));
  process.on('SIGINT', () => shutdown('SIGINT'));
}

void main();
