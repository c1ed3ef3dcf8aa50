// grpc.health.v1 (Check, Watch, List) for both of the data plane's sockets from one table of
// statuses: "" and the DataPlane service, and "fd-store" (fd-store-watch.ts). Kubernetes' gRPC
// probes and `seccompctl health` call Check.
import * as grpc from '@grpc/grpc-js';
import { status } from '@grpc/grpc-js';
import {
  HealthCheckResponse_ServingStatus as ServingStatus,
  HealthService,
  type HealthCheckRequest,
  type HealthCheckResponse,
  type HealthListResponse,
  type HealthServer,
} from '../proto/gen/grpc/health/v1/health';

export type HealthState = 'SERVING' | 'NOT_SERVING';

/** Open Watch streams at most, over both sockets (a probe needs one; each costs a subscription). */
export const MAX_HEALTH_WATCHES = 64;

export class HealthStatuses {
  private readonly statuses = new Map<string, ServingStatus>();
  private readonly watchers = new Set<(service: string) => void>();

  constructor(initial: Record<string, HealthState>) {
    for (const [service, state] of Object.entries(initial)) this.statuses.set(service, ServingStatus[state]);
  }

  setStatus(service: string, state: HealthState): void {
    const next = ServingStatus[state];
    if (this.statuses.get(service) === next) return;
    this.statuses.set(service, next);
    for (const notify of this.watchers) notify(service);
  }

  /** A service's status; SERVICE_UNKNOWN for one never set (what Watch says; Check says NOT_FOUND). */
  statusOf(service: string): ServingStatus {
    return this.statuses.get(service) ?? ServingStatus.SERVICE_UNKNOWN;
  }

  /** Open Watch streams (each ends its subscription when its client goes). */
  get watching(): number {
    return this.watchers.size;
  }

  addTo(server: grpc.Server): void {
    const implementation: HealthServer = {
      check: (call, callback) => {
        const found = this.statuses.get(call.request.service);
        if (found === undefined) callback({ code: status.NOT_FOUND, details: `unknown service ${JSON.stringify(call.request.service)}` });
        else callback(null, { status: found });
      },
      // The status now, then each change, until the client goes.
      watch: (call: grpc.ServerWritableStream<HealthCheckRequest, HealthCheckResponse>) => {
        if (this.watchers.size >= MAX_HEALTH_WATCHES) {
          call.emit('error', { code: status.RESOURCE_EXHAUSTED, details: `${MAX_HEALTH_WATCHES} health Watch streams are open already` });
          return;
        }
        const service = call.request.service;
        let last: ServingStatus | undefined;
        const send = (changed: string) => {
          if (changed !== service) return;
          const now = this.statusOf(service);
          if (now !== last) call.write({ status: now });
          last = now;
        };
        this.watchers.add(send);
        const stop = () => this.watchers.delete(send);
        call.on('cancelled', stop);
        call.on('error', stop);
        call.on('close', stop);
        send(service);
      },
      list: (_call, callback) => {
        const statuses: HealthListResponse['statuses'] = {};
        for (const [service, state] of this.statuses) statuses[service] = { status: state };
        callback(null, { statuses });
      },
    };
    server.addService(HealthService, implementation);
  }
}
