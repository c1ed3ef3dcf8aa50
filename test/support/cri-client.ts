// A small CRI client (runtime.v1 RuntimeService) over @grpc/grpc-js, for driving containerd's CRI
// plugin the way a kubelet does. The .proto is the subset in test/cri/api.proto, loaded at run
// time with @grpc/proto-loader: field names are camelCase, enums strings, int64 numbers.
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import * as path from 'node:path';
import { ROOT } from './paths';

export const CRI_PROTO = path.join(ROOT, 'test', 'cri', 'api.proto');

export type NamespaceMode = 'POD' | 'CONTAINER' | 'NODE' | 'TARGET';
export type ContainerState = 'CONTAINER_CREATED' | 'CONTAINER_RUNNING' | 'CONTAINER_EXITED' | 'CONTAINER_UNKNOWN';

export interface NamespaceOption {
  network?: NamespaceMode;
  pid?: NamespaceMode;
  ipc?: NamespaceMode;
}

export interface SecurityProfile {
  profileType: 'RuntimeDefault' | 'Unconfined' | 'Localhost';
  localhostRef?: string;
}

export interface PodSandboxConfig {
  metadata: { name: string; uid: string; namespace: string; attempt?: number };
  hostname?: string;
  logDirectory?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  linux?: { cgroupParent?: string; securityContext?: { namespaceOptions?: NamespaceOption } };
}

export interface ContainerConfig {
  metadata: { name: string; attempt?: number };
  image: { image: string };
  command?: string[];
  args?: string[];
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  logPath?: string;
  linux?: { securityContext?: { namespaceOptions?: NamespaceOption; seccomp?: SecurityProfile } };
}

export interface CriContainer {
  id: string;
  podSandboxId: string;
  metadata: { name: string; attempt: number };
  state: ContainerState;
  annotations: Record<string, string>;
  labels: Record<string, string>;
}

export interface CriPodSandbox {
  id: string;
  metadata: { name: string; uid: string; namespace: string; attempt: number };
  state: 'SANDBOX_READY' | 'SANDBOX_NOTREADY';
}

export interface ExecSyncResult {
  stdout: Buffer;
  stderr: Buffer;
  exitCode: number;
}

type Unary = (request: object, metadata: grpc.Metadata, options: grpc.CallOptions, callback: (err: grpc.ServiceError | null, response: unknown) => void) => void;

let runtimeService: grpc.ServiceClientConstructor | null = null;

function loadRuntimeService(): grpc.ServiceClientConstructor {
  if (!runtimeService) {
    const definition = protoLoader.loadSync(CRI_PROTO, { keepCase: false, longs: Number, enums: String, defaults: true });
    const runtime = (grpc.loadPackageDefinition(definition).runtime as grpc.GrpcObject).v1 as grpc.GrpcObject;
    runtimeService = runtime.RuntimeService as grpc.ServiceClientConstructor;
  }
  return runtimeService;
}

/** RuntimeService on a CRI socket; every call has a deadline. */
export class CriClient {
  private readonly client: grpc.Client;

  constructor(readonly socket: string, private readonly timeoutMs = 60_000) {
    const Service = loadRuntimeService();
    this.client = new Service(`unix://${socket}`, grpc.credentials.createInsecure());
  }

  close(): void {
    this.client.close();
  }

  private call<T>(method: string, request: object, timeoutMs = this.timeoutMs): Promise<T> {
    const fn = (this.client as unknown as Record<string, Unary>)[method].bind(this.client);
    return new Promise<T>((resolve, reject) => {
      fn(request, new grpc.Metadata(), { deadline: Date.now() + timeoutMs }, (err, response) => {
        if (err) reject(new Error(`CRI ${method} on ${this.socket}: ${err.message}`, { cause: err }));
        else resolve(response as T);
      });
    });
  }

  version(): Promise<{ version: string; runtimeName: string; runtimeVersion: string; runtimeApiVersion: string }> {
    return this.call('Version', { version: 'v1' });
  }

  async runPodSandbox(config: PodSandboxConfig, runtimeHandler = ''): Promise<string> {
    return (await this.call<{ podSandboxId: string }>('RunPodSandbox', { config, runtimeHandler })).podSandboxId;
  }

  async stopPodSandbox(podSandboxId: string): Promise<void> {
    await this.call('StopPodSandbox', { podSandboxId });
  }

  async removePodSandbox(podSandboxId: string): Promise<void> {
    await this.call('RemovePodSandbox', { podSandboxId });
  }

  async listPodSandbox(): Promise<CriPodSandbox[]> {
    return (await this.call<{ items: CriPodSandbox[] }>('ListPodSandbox', {})).items;
  }

  async createContainer(podSandboxId: string, config: ContainerConfig, sandboxConfig: PodSandboxConfig): Promise<string> {
    return (await this.call<{ containerId: string }>('CreateContainer', { podSandboxId, config, sandboxConfig })).containerId;
  }

  async startContainer(containerId: string): Promise<void> {
    await this.call('StartContainer', { containerId });
  }

  async stopContainer(containerId: string, timeout = 0): Promise<void> {
    await this.call('StopContainer', { containerId, timeout });
  }

  async removeContainer(containerId: string): Promise<void> {
    await this.call('RemoveContainer', { containerId });
  }

  async listContainers(filter: { podSandboxId?: string; state?: ContainerState } = {}): Promise<CriContainer[]> {
    const request = { filter: { podSandboxId: filter.podSandboxId ?? '', ...(filter.state ? { state: { state: filter.state } } : {}) } };
    return (await this.call<{ containers: CriContainer[] }>('ListContainers', request)).containers;
  }

  /** ContainerStatus with verbose info; `pid` from the runtime's info JSON. */
  async containerPid(containerId: string): Promise<number> {
    const response = await this.call<{ info: Record<string, string> }>('ContainerStatus', { containerId, verbose: true });
    return Number((JSON.parse(response.info.info ?? '{}') as { pid?: number }).pid ?? 0);
  }

  execSync(containerId: string, cmd: string[], timeoutSeconds = 30): Promise<ExecSyncResult> {
    return this.call('ExecSync', { containerId, cmd, timeout: timeoutSeconds }, (timeoutSeconds + 10) * 1000);
  }
}
