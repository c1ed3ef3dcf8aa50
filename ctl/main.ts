// seccompctl: status, containers, watch and health of the data plane, for people (tables, a live
// event view) and scripts (--json).
import * as grpc from '@grpc/grpc-js';
import { HealthClient, healthCheckResponse_ServingStatusToJSON } from '../proto/gen/grpc/health/v1/health';
import { createDataPlaneClient, getStatus, listContainers } from '../common/dataplane-client';
import { AgentError } from '../common/errors';
import { helpText, parseCommandLine } from '../common/options';
import { controlSocketPath } from '../common/shared-options';
import { CTL_OPTIONS } from './options';
import { Event, GetStatusResponse, ListContainersResponse } from '../proto/gen/seccompagent/v1/dataplane';
import { formatContainers, formatEvent, formatStatus } from './format';
import { ctlSocketPath, POLICIES_PATH, type PoliciesAnswer } from '../common/ctl-protocol';
import { explainCommand } from './explain';
import { formatLintReport, lintFiles } from './lint';
import { formatPolicies, getJson } from './policies';


const SUMMARY = `Inspect the seccomp agent's data plane.

Commands:
  status       version, control plane, default action, counters
  containers   the containers (notify fds) served now: pod labels, policy version and rules
  watch        live events: notifications, answers, containers, control planes
  health       exit 0 when the data plane serves (grpc.health.v1), 1 otherwise (--control: on the control socket)
  policies     the policy resources the control plane knows: scope, mode, Ready, rules, containers here
  explain CONTAINER SYSCALL [ARGS] [--arch x86_64|i386|x32]
               which rule answers SYSCALL of CONTAINER (id, id prefix or NS/POD[/CONTAINER]) and why:
               the data plane's rules as pushed, then, for an "ask" rule, the control plane's policy;
               numeric ARGS are raw arguments, others paths (explain c1 mkdir /etc/x 0755)
  lint PROFILE...
               what in a seccomp profile (OCI JSON, config.json, or SPO SeccompProfile YAML) will hang,
               break or weaken its containers with this agent: severity, rule, why, fix; exit 1 on
               errors (--metadata TEXT, --runtime runc|crun, --json); needs no data plane`;

function deadline(seconds: number): Date {
  return new Date(Date.now() + seconds * 1000);
}

async function waitReady(client: grpc.Client, seconds: number): Promise<void> {
  await new Promise<void>((resolve, reject) => client.waitForReady(deadline(seconds), (err) => (err ? reject(err) : resolve())));
}

function unreachable(socket: string, err: unknown): AgentError {
  return new AgentError('EDATAPLANE_UNREACHABLE', `cannot reach the data plane at ${socket}: ${(err as Error).message}`);
}

async function health(socket: string, seconds: number): Promise<string> {
  const client = new HealthClient(`unix://${socket}`, grpc.credentials.createInsecure());
  try {
    await waitReady(client, seconds);
    const response = await new Promise<string>((resolve, reject) =>
      client.check({ service: '' }, new grpc.Metadata(), { deadline: deadline(seconds) }, (err, res) =>
        (err ? reject(err) : resolve(healthCheckResponse_ServingStatusToJSON(res.status)))));
    if (response !== 'SERVING') throw new AgentError('ENOT_SERVING', `data plane at ${socket} is ${response}`);
    return response;
  } finally {
    client.close();
  }
}

async function main(): Promise<number> {
  const parsed = parseCommandLine(CTL_OPTIONS, process.argv.slice(2));
  const command = parsed.positional[0];
  if (parsed.help || !command) {
    process.stdout.write(`${helpText('seccompctl <command>', SUMMARY, CTL_OPTIONS)}\n`);
    return parsed.help ? 0 : 2;
  }
  if (!['status', 'containers', 'watch', 'health', 'policies', 'explain', 'lint'].includes(command)) {
    throw new AgentError('EUNKNOWN_COMMAND', `unknown command "${command}": use status, containers, watch, health, policies, explain or lint`);
  }
  const { grpcSocket, json, timeout } = parsed.options;
  const out = (text: string) => process.stdout.write(`${text}\n`);
  if (command === 'lint') {
    const report = lintFiles([...parsed.positional.slice(1), ...parsed.rest], { metadata: parsed.options.metadata, runtime: parsed.options.runtime });
    out(json ? JSON.stringify(report) : formatLintReport(report));
    return report.errors > 0 ? 1 : 0;
  }
  const ctlSocket = ctlSocketPath(parsed.options.ctlSocket, grpcSocket);
  if (command === 'policies') {
    const { policies } = await getJson<PoliciesAnswer>(ctlSocket, POLICIES_PATH, timeout);
    out(json ? JSON.stringify(policies) : formatPolicies(policies));
    return 0;
  }
  if (command === 'health') {
    const socket = parsed.options.control ? controlSocketPath(parsed.options.controlSocket, grpcSocket) : grpcSocket;
    try {
      const status = await health(socket, timeout);
      out(json ? JSON.stringify({ status }) : `data plane at ${socket}: ${status}`);
      return 0;
    } catch (err) {
      process.stderr.write(`seccompctl health: ${(err as Error).message}\n`);
      return 1;
    }
  }
  const client = createDataPlaneClient(grpcSocket);
  try {
    await waitReady(client, timeout).catch((err) => {
      throw unreachable(grpcSocket, err);
    });
    switch (command) {
      case 'status': {
        const status = await getStatus(client);
        out(json ? JSON.stringify(GetStatusResponse.toJSON(status)) : formatStatus(status));
        return 0;
      }
      case 'explain': {
        const [, container, syscall, ...args] = parsed.positional;
        if (!container || !syscall) throw new AgentError('EUSAGE', 'usage: seccompctl explain CONTAINER SYSCALL [ARGS...]');
        const { lines, ...result } = await explainCommand(client, ctlSocket, container, syscall, [...args, ...parsed.rest], timeout, parsed.options.arch);
        out(json ? JSON.stringify(result) : lines.join('\n'));
        return 0;
      }
      case 'containers': {
        const list = await listContainers(client);
        out(json ? JSON.stringify(ListContainersResponse.toJSON(list)) : formatContainers(list.containers));
        return 0;
      }
      case 'watch': {
        const { container, syscall } = parsed.options;
        const call = client.watch({ containerIds: container ? [container] : [], syscalls: syscall ? [syscall] : [] });
        call.on('data', (event: Event) => out(json ? JSON.stringify(Event.toJSON(event)) : formatEvent(event)));
        process.on('SIGINT', () => call.cancel());
        return await new Promise<number>((resolve) => {
          call.on('error', (err: grpc.ServiceError) => {
            if (err.code === grpc.status.CANCELLED) resolve(0);
            else {
              process.stderr.write(`seccompctl watch: stream ended: ${err.details || err.message}\n`);
              resolve(1);
            }
          });
          call.on('end', () => resolve(0));
        });
      }
      default:
        return 2;
    }
  } finally {
    client.close();
  }
}

main().then(
  (code) => process.exit(code),
  (err: Error) => {
    process.stderr.write(`seccompctl: ${err.message}\n`);
    process.exit(err instanceof AgentError && (err.code === 'EDATAPLANE_UNREACHABLE' || err.code === 'ECONTROLPLANE_UNREACHABLE') ? 3 : 2);
  },
);
