// deploy/: the Kubernetes manifests, the Dockerfile, the systemd units and the example profiles
// must be valid and must agree with the programs (option tables, default socket paths, bin names)
// and with docs/operators.md. Nothing here can run a cluster; the objects are validated against
// the Kubernetes API schemas (kubernetes-models), unknown fields included. The checks that run
// programs (the probes, a rolling update, socket activation, kubectl kustomize, systemd-analyze
// verify) are in test/integration/deploy.test.ts.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { parseAllDocuments, isScalar, isSeq } from 'yaml';
import { DaemonSet } from 'kubernetes-models/apps/v1';
import { Namespace, Pod, ServiceAccount } from 'kubernetes-models/v1';
import type { IContainer } from 'kubernetes-models/v1/Container';
import { ClusterRole, ClusterRoleBinding } from 'kubernetes-models/rbac.authorization.k8s.io/v1';
import { CustomResourceDefinition } from 'kubernetes-models/apiextensions.k8s.io/v1';
import { celEnv, CelScalar, isCelError, mapType, parse as parseCel, plan as planCel } from '@bufbuild/cel';
import { parseCommandLine, type OptionTable } from '../../common/options';
import { VERSION } from '../../common/version';
import { controlSocketPath, DEFAULT_GRPC_SOCKET } from '../../common/shared-options';
import { DATAPLANE_OPTIONS, DEFAULT_LISTENER_SOCKET } from '../../dataplane/options';
import { CONTROLPLANE_OPTIONS } from '../../controlplane/options';
import { CTL_OPTIONS } from '../../ctl/options';
import { parseListenerMetadata } from '../../common/profile/listener-metadata';
import { readProfileDocuments } from '../../common/profile/document';
import { lintProfile } from '../../common/profile/lint';
import {
  container, dockerStages, hostPathOf, imageBinDir, K8S_FILES, kube, loadYaml, NODE_BY_NODE, one, parseUnit, podSpec, read, single,
  type Json, type Manifest, type Stage,
} from '../support/deploy-files';
import { ROOT } from '../support/paths';

// eslint-disable-next-line @typescript-eslint/no-require-imports
const PACKAGE = require(path.join(ROOT, 'package.json')) as { bin: Record<string, string> };

// ---------------------------------------------------------------------------------------------
// Loading and validating

interface ModelClass {
  new (data: never): { validate(): void };
  prototype: { validate(this: unknown): void };
}
const MODELS: Record<string, ModelClass> = {
  'v1/Namespace': Namespace as unknown as ModelClass,
  'v1/ServiceAccount': ServiceAccount as unknown as ModelClass,
  'v1/Pod': Pod as unknown as ModelClass,
  'apps/v1/DaemonSet': DaemonSet as unknown as ModelClass,
  'rbac.authorization.k8s.io/v1/ClusterRole': ClusterRole as unknown as ModelClass,
  'rbac.authorization.k8s.io/v1/ClusterRoleBinding': ClusterRoleBinding as unknown as ModelClass,
  'apiextensions.k8s.io/v1/CustomResourceDefinition': CustomResourceDefinition as unknown as ModelClass,
};

/** Wraps `value` so every property the schema validator reads is recorded by its path. */
function tracked(value: unknown, at: string, seen: Set<string>): unknown {
  if (value === null || typeof value !== 'object') return value;
  return new Proxy(value, {
    get(target, key, receiver) {
      if (typeof key !== 'string') return Reflect.get(target, key, receiver);
      seen.add(`${at}/${key}`);
      return tracked(Reflect.get(target, key, receiver), `${at}/${key}`, seen);
    },
  });
}

function unreadFields(value: unknown, at: string, seen: Set<string>, out: string[]): string[] {
  if (value === null || typeof value !== 'object') return out;
  for (const key of Object.keys(value)) {
    const p = `${at}/${key}`;
    if (!seen.has(p)) out.push(p);
    else unreadFields((value as Json)[key], p, seen, out);
  }
  return out;
}

/**
 * Schema validation as `new Kind(obj).validate()`, plus unknown fields: the generated validator
 * reads every property its schema defines and only those, so a property it never read is one the
 * API server would reject under strict field validation (a typo such as `tolleration`).
 */
function validateObject(m: Manifest): void {
  const where = `${m.file}: ${m.obj.kind} ${m.obj.metadata?.name}`;
  const Model = MODELS[`${m.obj.apiVersion}/${m.obj.kind}`];
  assert.ok(Model, `${where}: apiVersion ${m.obj.apiVersion} kind ${m.obj.kind} is not one this test knows`);
  new Model(m.obj as never).validate();
  const seen = new Set<string>();
  Model.prototype.validate.call(tracked(m.obj, '', seen));
  // The validator of the recursive JSONSchemaProps does not read through the proxy: a CRD's
  // schemas are checked key by key against JSONSchemaProps instead (schemaKeyProblems).
  const unread = unreadFields(m.obj, '', seen, []).filter((p) => !/^\/spec\/versions\/\d+\/schema\/openAPIV3Schema\//.test(p));
  assert.deepEqual(unread, [], `${where}: fields the Kubernetes schema does not have`);
  for (const version of m.obj.kind === 'CustomResourceDefinition' ? m.obj.spec.versions : []) {
    assert.deepEqual(schemaKeyProblems(version.schema.openAPIV3Schema, version.name, []), [], `${where}: keys JSONSchemaProps does not have`);
  }
}

/** The keys of apiextensions.k8s.io/v1 JSONSchemaProps (kubernetes-models' type). */
const SCHEMA_KEYS = new Set(('$ref $schema additionalItems additionalProperties allOf anyOf default definitions dependencies description enum example ' +
  'exclusiveMaximum exclusiveMinimum externalDocs format id items maxItems maxLength maxProperties maximum minItems minLength minProperties minimum ' +
  'multipleOf not nullable oneOf pattern patternProperties properties required title type uniqueItems x-kubernetes-embedded-resource ' +
  'x-kubernetes-int-or-string x-kubernetes-list-map-keys x-kubernetes-list-type x-kubernetes-map-type x-kubernetes-preserve-unknown-fields ' +
  'x-kubernetes-validations').split(' '));
const RULE_KEYS = new Set(['rule', 'message', 'messageExpression', 'reason', 'fieldPath', 'optionalOldSelf']);

function schemaKeyProblems(schema: Json, at: string, out: string[]): string[] {
  for (const key of Object.keys(schema)) if (!SCHEMA_KEYS.has(key)) out.push(`${at}: ${key}`);
  for (const v of (schema['x-kubernetes-validations'] ?? []) as Json[]) for (const key of Object.keys(v)) if (!RULE_KEYS.has(key)) out.push(`${at} x-kubernetes-validations: ${key}`);
  for (const [name, child] of Object.entries((schema.properties ?? {}) as Record<string, Json>)) schemaKeyProblems(child, `${at}.${name}`, out);
  if (schema.items) schemaKeyProblems(schema.items, `${at}[]`, out);
  if (schema.additionalProperties && typeof schema.additionalProperties === 'object') schemaKeyProblems(schema.additionalProperties, `${at}{}`, out);
  return out;
}

// ---------------------------------------------------------------------------------------------
// The DaemonSet, seen from the programs

/** The options the program in `c` ends up with: its args and env through its own option table. */
function effectiveOptions<T extends OptionTable>(table: T, c: IContainer) {
  const tableEnv = new Set(Object.values(table).map((o) => o.env).filter(Boolean));
  const env: Record<string, string> = {};
  for (const e of c.env ?? []) {
    assert.ok(tableEnv.has(e.name), `${c.name}: env ${e.name} is not read by the program (its table has ${[...tableEnv].join(', ')})`);
    env[e.name] = e.value ?? 'from-the-downward-api';
  }
  const parsed = parseCommandLine(table, c.args ?? [], env);
  assert.deepEqual(parsed.positional, [], `${c.name}: arguments that are not options`);
  return parsed.options;
}

/** A program path used by a manifest or a unit: <install dir>/bin/<a bin name of package.json>. */
function assertProgram(program: string, expected: string, where: string): void {
  assert.equal(path.posix.dirname(program), imageBinDir(), `${where}: ${program} is not in the image's bin directory`);
  assert.ok(Object.keys(PACKAGE.bin).includes(path.posix.basename(program)), `${where}: ${program} is not a bin of package.json`);
  assert.equal(path.posix.basename(program), expected, `${where}: runs ${program}`);
}

/** Capabilities from the table in docs/operators.md, section "Capabilities". */
function documentedCapabilities(): string[] {
  const doc = read('docs/operators.md');
  const section = /^## Capabilities\n([\s\S]*?)(?=^## )/m.exec(doc);
  assert.ok(section, 'docs/operators.md has a "## Capabilities" section');
  const caps = [...section[1].matchAll(/^\|\s*`([A-Z_]+)`\s*\|/gm)].map((m) => m[1]);
  assert.ok(caps.length > 0, 'the Capabilities section has a table of `NAME` rows');
  return caps;
}

// ---------------------------------------------------------------------------------------------
// Dockerfile and systemd units, parsed

/** COPY sources of a stage ("--from=build" ones only when from is given). */
function copySources(stage: Stage, from?: string): string[] {
  const out: string[] = [];
  for (const line of stage.text.split('\n')) {
    const words = line.trim().split(/\s+/);
    if (words[0] !== 'COPY') continue;
    const fromFlag = words.find((w) => w.startsWith('--from='));
    const paths = words.slice(1).filter((w) => !w.startsWith('--'));
    if (fromFlag !== (from === undefined ? undefined : `--from=${from}`)) continue;
    out.push(...paths.slice(0, -1));
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Kubernetes objects

test('deploy/kubernetes: kustomization.yaml lists exactly the manifests of the directory', () => {
  const [k] = loadYaml('deploy/kubernetes/kustomization.yaml');
  assert.equal(k.obj.apiVersion, 'kustomize.config.k8s.io/v1beta1');
  assert.equal(k.obj.kind, 'Kustomization');
  const files = fs.readdirSync(path.join(ROOT, 'deploy/kubernetes')).filter((f) => /\.ya?ml$/.test(f) && f !== 'kustomization.yaml');
  // ../crds: the policy resources' definitions come with the install.
  assert.deepEqual([...k.obj.resources].sort(), [...files, '../crds'].sort());
  assert.deepEqual([...k.obj.resources].filter((r: string) => r !== '../crds').sort(), K8S_FILES.map((f) => path.basename(f)).sort());
});

test('deploy/kubernetes: every object is valid for the Kubernetes API, with no unknown field', () => {
  const all = kube();
  assert.deepEqual(all.map((m) => m.obj.kind).sort(), ['ClusterRole', 'ClusterRoleBinding', 'DaemonSet', 'Namespace', 'ServiceAccount']);
  for (const m of all) validateObject(m);
});

test('deploy/kubernetes: namespace, service account, binding and DaemonSet name each other consistently', () => {
  const ds = one('DaemonSet').obj;
  const ns = one('Namespace').obj;
  const sa = one('ServiceAccount').obj;
  const binding = one('ClusterRoleBinding').obj;
  const role = one('ClusterRole').obj;
  assert.equal(ds.metadata.namespace, ns.metadata.name);
  assert.equal(sa.metadata.namespace, ns.metadata.name);
  assert.equal(ds.spec.template.spec.serviceAccountName, sa.metadata.name);
  assert.deepEqual(binding.roleRef, { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: role.metadata.name });
  assert.deepEqual(binding.subjects, [{ kind: 'ServiceAccount', name: sa.metadata.name, namespace: ns.metadata.name }]);
  // hostPID, hostPath and added capabilities are only admitted at the "privileged" level.
  assert.equal(ns.metadata.labels['pod-security.kubernetes.io/enforce'], 'privileged');
});

test('deploy/kubernetes: the ClusterRole grants what the control plane uses and nothing else: pods, namespaces, the policies and their status', () => {
  assert.deepEqual(one('ClusterRole').obj.rules, [
    { apiGroups: [''], resources: ['pods'], verbs: ['get', 'list', 'watch'] },
    // namespaceSelector of ClusterSeccompNotifyPolicy: the informer lists and watches namespaces.
    { apiGroups: [''], resources: ['namespaces'], verbs: ['list', 'watch'] },
    // The policy informers list and watch; nothing gets one by name.
    { apiGroups: ['seccompagent.dev'], resources: ['seccompnotifypolicies', 'clusterseccompnotifypolicies'], verbs: ['list', 'watch'] },
    // Status by server-side apply, which is the patch verb; never update, create or delete.
    { apiGroups: ['seccompagent.dev'], resources: ['seccompnotifypolicies/status', 'clusterseccompnotifypolicies/status'], verbs: ['patch'] },
  ]);
  for (const rule of one('ClusterRole').obj.rules) {
    if (rule.apiGroups[0] !== 'seccompagent.dev') continue;
    for (const resource of rule.resources as string[]) {
      const plural = resource.split('/')[0];
      assert.ok(crds().some((m) => m.obj.spec.names.plural === plural), `${resource}: a resource of deploy/crds`);
    }
  }
});

test('DaemonSet: dataplane, controlplane and the init container run one image, tagged with the package version', () => {
  const spec = podSpec();
  const images = [...spec.containers, ...(spec.initContainers ?? [])].map((c) => c.image);
  assert.deepEqual(spec.containers.map((c) => c.name).sort(), ['controlplane', 'dataplane']);
  assert.equal(new Set(images).size, 1, `images: ${images.join(', ')}`);
  const [name, tag] = String(images[0]).split(':');
  assert.equal(tag, VERSION);
  const [k] = loadYaml('deploy/kubernetes/kustomization.yaml');
  assert.deepEqual(k.obj.images, [{ name, newTag: VERSION }]);
});

test('DaemonSet: both containers mount the one sockets hostPath at the same path, which holds the default gRPC socket', () => {
  const spec = podSpec();
  const mountsOf = (name: string) => (container(name).volumeMounts ?? []).filter((m) => spec.volumes?.find((v) => v.name === m.name)?.hostPath?.path === '/run/seccomp-agent');
  const dp = mountsOf('dataplane');
  const cp = mountsOf('controlplane');
  assert.equal(dp.length, 1, 'dataplane mounts /run/seccomp-agent once');
  assert.deepEqual(cp, dp);
  const volume = spec.volumes!.find((v) => v.name === dp[0].name)!;
  assert.equal(volume.hostPath!.type, 'DirectoryOrCreate');
  assert.equal(dp[0].mountPath, path.posix.dirname(DEFAULT_GRPC_SOCKET));
  assert.notEqual(dp[0].readOnly, true);
});

test('DaemonSet: the data plane container runs seccomp-keeper first, then the data plane with --takeover', () => {
  const dp = container('dataplane');
  const command = dp.command ?? [];
  // The keeper itself is the entrypoint (no shell in between): it is the process the runtime
  // signals, and the one that holds the fds while the data plane restarts.
  assert.equal(command.length, 4, `dataplane command: ${command.join(' ')}`);
  assertProgram(command[0], 'seccomp-keeper', 'dataplane command');
  // Its store's socket in a root-only directory inside an emptyDir (the root filesystem is read-only).
  assert.equal(command[1], '--socket-dir=/run/seccomp-keeper/store');
  assert.ok((dp.volumeMounts ?? []).some((m: { name: string; mountPath: string }) => m.name === 'keeper-store' && m.mountPath === '/run/seccomp-keeper'));
  assert.equal(command[2], '--', '"--" ends the keeper\'s options');
  assertProgram(command[3], 'seccomp-dataplane', 'dataplane command, after the keeper');
  assert.equal(DATAPLANE_OPTIONS.takeover.flag, 'takeover');
  assert.ok((dp.args ?? []).includes(`--${DATAPLANE_OPTIONS.takeover.flag}`), 'the data plane args say --takeover');
  assert.equal(effectiveOptions(DATAPLANE_OPTIONS, dp).takeover, true);
});

test('DaemonSet: data plane flags exist in DATAPLANE_OPTIONS and put both sockets in the shared directory', () => {
  const dp = container('dataplane');
  const options = effectiveOptions(DATAPLANE_OPTIONS, dp);
  // The probes and the control plane use the default gRPC socket: the data plane must serve it.
  assert.equal(options.grpcSocket, DEFAULT_GRPC_SOCKET);
  assert.equal(hostPathOf(options.grpcSocket, dp), DEFAULT_GRPC_SOCKET);
  assert.equal(path.posix.dirname(hostPathOf(options.listenerSockets[0], dp)), path.posix.dirname(DEFAULT_GRPC_SOCKET));
  // The control plane runs as a member of the control socket's group, not as root; the observer
  // socket's group is another one, so those who watch cannot attach.
  assert.equal(options.socketMode, 0o660);
  assert.equal(controlSocketPath(options.controlSocket, options.grpcSocket), path.posix.join(path.posix.dirname(DEFAULT_GRPC_SOCKET), 'control.sock'));
  assert.ok(options.controlSocketGroup !== null && options.socketGroup !== null);
  assert.notEqual(options.controlSocketGroup, options.socketGroup, 'observers do not get the control socket');
  for (const group of [options.socketGroup, options.controlSocketGroup]) assert.ok(podSpec().securityContext?.supplementalGroups?.includes(Number(group)), `supplementalGroups has ${group}`);
  assert.equal(container('controlplane').securityContext?.runAsGroup, Number(options.controlSocketGroup));
});

test('DaemonSet: the listener-link init container makes the default listenerPath reach the data plane listener', () => {
  const init = container('listener-link');
  assert.ok((podSpec().initContainers ?? []).some((c) => c.name === init.name), 'listener-link is an init container');
  const env = Object.fromEntries((init.env ?? []).map((e) => [e.name, e.value ?? '']));
  const hostLink = hostPathOf(env.LINK, init);
  assert.equal(hostLink, DEFAULT_LISTENER_SOCKET);
  const listener = effectiveOptions(DATAPLANE_OPTIONS, container('dataplane')).listenerSockets[0];
  assert.equal(path.posix.resolve(path.posix.dirname(hostLink), env.TARGET), hostPathOf(listener, container('dataplane')));
  assert.ok(!env.TARGET.startsWith('/'), 'the link target is relative, so it resolves on the host, not in the container');
});

test('DaemonSet: control plane flags exist in CONTROLPLANE_OPTIONS; it attaches to the data plane socket; NODE_NAME from the downward API', () => {
  const cp = container('controlplane');
  assertProgram(cp.command![0], 'seccomp-controlplane', 'controlplane command');
  const options = effectiveOptions(CONTROLPLANE_OPTIONS, cp);
  assert.equal(options.grpcSocket, effectiveOptions(DATAPLANE_OPTIONS, container('dataplane')).grpcSocket);
  const dpOptions = effectiveOptions(DATAPLANE_OPTIONS, container('dataplane'));
  assert.equal(controlSocketPath(options.controlSocket, options.grpcSocket), controlSocketPath(dpOptions.controlSocket, dpOptions.grpcSocket), 'it attaches on the data plane\'s control socket');
  assert.equal(options.noKubernetes, false);
  assert.equal(CONTROLPLANE_OPTIONS.nodeName.env, 'NODE_NAME');
  const nodeName = (cp.env ?? []).find((e) => e.name === 'NODE_NAME');
  assert.deepEqual(nodeName?.valueFrom, { fieldRef: { fieldPath: 'spec.nodeName' } });
  // In-cluster config reads the token where automountServiceAccountToken would have put it.
  assert.ok((cp.volumeMounts ?? []).some((m) => m.mountPath === '/var/run/secrets/kubernetes.io/serviceaccount'));
  assert.ok(!(container('dataplane').volumeMounts ?? []).some((m) => m.mountPath.startsWith('/var/run/secrets')), 'no API token for the data plane');
});

test('DaemonSet: metrics listen on 127.0.0.1 only, and no container declares a port (issue 17: not reachable from every pod)', () => {
  for (const [name, table] of [['dataplane', DATAPLANE_OPTIONS], ['controlplane', CONTROLPLANE_OPTIONS]] as const) {
    const c = container(name);
    const addr = effectiveOptions(table as OptionTable, c).metricsAddr as { host: string; port: number } | null;
    assert.ok(addr, `${name} serves metrics`);
    assert.equal(addr.host, '127.0.0.1', `${name} metrics on loopback`);
    assert.deepEqual(c.ports ?? [], []);
  }
});

/** The data plane's readiness script: `/bin/sh -c SCRIPT`, checked for its two parts. */
function dataPlaneProbeScript(): string {
  const dp = container('dataplane');
  const command = dp.readinessProbe?.exec?.command ?? [];
  assert.deepEqual(command.slice(0, 2), ['/bin/sh', '-c'], 'dataplane readiness: a /bin/sh -c script');
  const script = command[2];
  const grpcSocket = effectiveOptions(DATAPLANE_OPTIONS, dp).grpcSocket;
  // Listed in /proc/net/unix of the pod's network namespace only while a process of the pod has
  // the data plane's gRPC socket bound; then seccompctl health asks that data plane.
  assert.equal(script, `grep -q ' ${grpcSocket}$' /proc/net/unix && exec ${imageBinDir()}/seccompctl health`);
  assert.equal(podSpec().hostNetwork, undefined, 'the check needs a network namespace of the pod\'s own');
  return script;
}

test('DaemonSet: probes: the data plane is ready only when its own pod serves; no liveness probe restarts it; the control plane runs "seccompctl health --control"', () => {
  const dp = container('dataplane');
  dataPlaneProbeScript();
  assert.ok((dp.readinessProbe!.timeoutSeconds ?? 1) > 5, 'dataplane: seccompctl waits up to 5 s; the kubelet must not give up first');
  // A liveness restart stops the keeper too, which releases every notify fd.
  assert.equal(dp.livenessProbe, undefined, 'dataplane: no liveness probe');
  const cp = container('controlplane');
  for (const probe of [cp.readinessProbe, cp.livenessProbe]) {
    const command = probe?.exec?.command;
    assert.ok(command, 'controlplane: exec probe');
    assertProgram(command[0], 'seccompctl', 'controlplane probe');
    // health --control: the control socket answers this container (the one it attaches on).
    assert.deepEqual(command.slice(1, 3), ['health', '--control']);
    const probeOptions = parseCommandLine(CTL_OPTIONS, command.slice(1), {}).options;
    const cpOptions = effectiveOptions(CONTROLPLANE_OPTIONS, cp);
    assert.equal(controlSocketPath(probeOptions.controlSocket, probeOptions.grpcSocket), controlSocketPath(cpOptions.controlSocket, cpOptions.grpcSocket));
    assert.ok((probe!.timeoutSeconds ?? 1) > 5, 'controlplane: probe timeoutSeconds');
  }
});

test('DaemonSet: RollingUpdate with maxSurge 1 and maxUnavailable 0 (the new pod starts before the old one stops)', () => {
  assert.deepEqual(one('DaemonSet').obj.spec.updateStrategy, { type: 'RollingUpdate', rollingUpdate: { maxSurge: 1, maxUnavailable: 0 } });
});

test('deploy/kubernetes-node-by-node: the overlay is the same install with an OnDelete DaemonSet', () => {
  const [k] = loadYaml(NODE_BY_NODE);
  assert.equal(k.obj.kind, 'Kustomization');
  assert.deepEqual(k.obj.resources, ['../kubernetes']);
  const ds = one('DaemonSet');
  assert.equal(k.obj.patches.length, 1);
  const { target, patch } = k.obj.patches[0];
  assert.deepEqual(target, { group: 'apps', version: 'v1', kind: 'DaemonSet', name: ds.obj.metadata.name });
  const ops = parseAllDocuments(patch as string)[0]?.toJS() as Json[];
  assert.deepEqual(ops.map((op) => [op.op, op.path]), [['replace', '/spec/updateStrategy']]);
  const patched = structuredClone(ds.obj);
  patched.spec.updateStrategy = ops[0].value;
  validateObject({ ...ds, file: k.file, obj: patched });
  assert.deepEqual(patched.spec.updateStrategy, { type: 'OnDelete' });
});

test('DaemonSet: hostPID, system-node-critical, every node, grace period, resources', () => {
  const spec = podSpec();
  assert.equal(spec.hostPID, true);
  assert.equal(spec.hostNetwork, undefined);
  assert.equal(spec.priorityClassName, 'system-node-critical');
  assert.deepEqual(spec.tolerations, [{ operator: 'Exists' }]);
  assert.ok(spec.terminationGracePeriodSeconds! >= 10 && spec.terminationGracePeriodSeconds! <= 120);
  for (const c of [...spec.containers, ...(spec.initContainers ?? [])]) {
    assert.ok(c.resources?.requests?.cpu && c.resources.requests.memory, `${c.name}: cpu and memory requests`);
    assert.ok(c.resources?.limits?.memory, `${c.name}: memory limit`);
  }
  // CFS throttling of the data plane would stall every intercepted syscall of the node.
  assert.equal(container('dataplane').resources?.limits?.cpu, undefined);
});

test('DaemonSet: data plane capabilities are the documented list, each with its reason; the others get none', () => {
  const documented = documentedCapabilities();
  const dp = container('dataplane');
  const sc = dp.securityContext!;
  assert.equal(sc.privileged, false);
  assert.deepEqual(sc.capabilities?.drop, ['ALL']);
  assert.deepEqual([...(sc.capabilities?.add ?? [])].sort(), [...documented].sort());
  assert.equal(new Set(sc.capabilities?.add).size, sc.capabilities?.add?.length, 'no capability twice');
  assert.deepEqual(sc.seccompProfile, { type: 'Unconfined' });
  // Each capability carries its reason as a comment on its line.
  const ds = one('DaemonSet');
  const index = podSpec().containers.findIndex((c) => c.name === 'dataplane');
  const add = ds.doc.getIn(['spec', 'template', 'spec', 'containers', index, 'securityContext', 'capabilities', 'add'], true);
  assert.ok(isSeq(add));
  for (const item of add.items) {
    assert.ok(isScalar(item) && (item.comment ?? '').trim().length > 10, `capability ${String(isScalar(item) ? item.value : item)} has no reason`);
  }
  for (const name of ['controlplane', 'listener-link']) {
    const other = container(name).securityContext!;
    assert.equal(other.privileged, false, `${name}: privileged`);
    assert.deepEqual(other.capabilities, { drop: ['ALL'] }, `${name}: capabilities`);
    assert.equal(other.allowPrivilegeEscalation, false, `${name}: allowPrivilegeEscalation`);
  }
  const cp = container('controlplane').securityContext!;
  assert.equal(cp.runAsNonRoot, true);
  assert.notEqual(cp.runAsUser, 0);
});

// ---------------------------------------------------------------------------------------------
// Example profiles

const PROFILE_FILE = 'deploy/profiles/seccomp-agent-mkdir.json';

test('profiles: the Localhost profile notifies mkdir, mkdirat and mount to the data plane default listener socket', () => {
  const profile = JSON.parse(read(PROFILE_FILE)) as Json;
  assert.equal(profile.listenerPath, DEFAULT_LISTENER_SOCKET);
  assert.equal(profile.defaultAction, 'SCMP_ACT_ALLOW');
  assert.deepEqual(profile.syscalls, [
    { names: ['mkdir', 'mkdirat', 'mount'], action: 'SCMP_ACT_NOTIFY' },
    { names: ['io_uring_setup', 'io_uring_enter', 'io_uring_register'], action: 'SCMP_ACT_ERRNO', errnoRet: 1 },
  ]);
  assert.equal(profile.listenerMetadata, 'MKDIR_TMPL=-{{.Namespace}}-{{.Pod}}\nMOUNT_PROC=true');
  // The control plane reads this metadata without a warning and finds both policies in it.
  const parsed = parseListenerMetadata(profile.listenerMetadata);
  assert.deepEqual(parsed.warnings, []);
  assert.ok(parsed.policy.mkdirTemplate);
  assert.deepEqual(parsed.policy.mount?.filesystems, ['proc']);
});

test('profiles: the Security Profiles Operator SeccompProfile has its shape and the same content as the JSON', () => {
  const all = loadYaml('deploy/profiles/seccompprofile.yaml');
  assert.equal(all.length, 1);
  const sp = all[0].obj;
  assert.equal(sp.apiVersion, 'security-profiles-operator.x-k8s.io/v1beta1');
  assert.equal(sp.kind, 'SeccompProfile');
  assert.deepEqual(Object.keys(sp).sort(), ['apiVersion', 'kind', 'metadata', 'spec']);
  assert.deepEqual(Object.keys(sp.metadata).sort(), ['name', 'namespace']);
  assert.match(sp.metadata.name, /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/);
  // Fields and enums of SeccompProfileSpec (api/seccompprofile/v1beta1 of the operator).
  const fields = ['baseProfileName', 'defaultAction', 'architectures', 'listenerPath', 'listenerMetadata', 'syscalls', 'flags'];
  const actions = ['SCMP_ACT_KILL', 'SCMP_ACT_KILL_PROCESS', 'SCMP_ACT_KILL_THREAD', 'SCMP_ACT_TRAP', 'SCMP_ACT_ERRNO', 'SCMP_ACT_TRACE', 'SCMP_ACT_ALLOW', 'SCMP_ACT_LOG', 'SCMP_ACT_NOTIFY'];
  for (const key of Object.keys(sp.spec)) assert.ok(fields.includes(key), `spec.${key} is not a SeccompProfile field`);
  assert.ok(actions.includes(sp.spec.defaultAction));
  for (const rule of sp.spec.syscalls) {
    assert.ok(Object.keys(rule).every((k) => ['action', 'names', 'errnoRet', 'args'].includes(k)), `rule keys ${Object.keys(rule)}`);
    assert.ok(actions.includes(rule.action));
    assert.ok(rule.names.length > 0 && rule.names.every((n: unknown) => typeof n === 'string'));
  }
  for (const arch of sp.spec.architectures) assert.match(arch, /^SCMP_ARCH_[A-Z0-9_]+$/);
  // The same profile but for the socket: the operator's folder instead of the default path.
  assert.deepEqual({ ...sp.spec, listenerPath: DEFAULT_LISTENER_SOCKET }, JSON.parse(read(PROFILE_FILE)));
});

/** SPO's current listenerPath rule (PR #3239, v1 and v1beta1 since 2026-06), kept as data. */
const SPO_LISTENER_PATH = new RegExp(read('test/testdata/spo-listener-path-pattern.txt').trim());
/** /var/run is a link to /run on the host: the path systemd and the kernel see. */
const onHost = (p: string) => p.replace(/^\/var\/run\//, '/run/');

test('profiles: every shipped SeccompProfile\'s listenerPath matches the operator\'s pattern and is served by the DaemonSet and the systemd units', () => {
  assert.ok(SPO_LISTENER_PATH.test('/var/run/security-profiles-operator/seccomp-agent.sock'));
  assert.ok(!SPO_LISTENER_PATH.test(DEFAULT_LISTENER_SOCKET), 'the pattern refuses the default path, as a current SPO does');
  const profiles = fs.readdirSync(path.join(ROOT, 'deploy/profiles')).filter((f) => /\.ya?ml$/.test(f))
    .flatMap((f) => loadYaml(`deploy/profiles/${f}`)).filter((m) => m.obj.kind === 'SeccompProfile');
  assert.ok(profiles.length > 0, 'deploy/profiles ships a SeccompProfile');
  const dp = container('dataplane');
  const served = effectiveOptions(DATAPLANE_OPTIONS, dp).listenerSockets.map((p) => hostPathOf(p, dp));
  const socketUnit = parseUnit('deploy/systemd/seccomp-agent.socket');
  for (const m of profiles) {
    const where = `${m.file}: ${m.obj.metadata.name}`;
    assert.match(m.obj.spec.listenerPath, SPO_LISTENER_PATH, `${where}: a current operator refuses this listenerPath`);
    assert.ok(served.includes(m.obj.spec.listenerPath), `${where}: the DaemonSet's data plane serves ${m.obj.spec.listenerPath} (it serves ${served.join(', ')})`);
    assert.ok(socketUnit.get('Socket', 'ListenStream').includes(onHost(m.obj.spec.listenerPath)), `${where}: seccomp-agent.socket listens on it`);
  }
});

test('profiles: seccompctl lint finds no error in any shipped profile; the only warning is the flag Debian\'s runc 1.1 refuses', () => {
  for (const file of fs.readdirSync(path.join(ROOT, 'deploy/profiles')).filter((f) => /\.(json|ya?ml)$/.test(f) && f !== 'example-pod.yaml')) {
    for (const doc of readProfileDocuments(read(`deploy/profiles/${file}`), file)) {
      const findings = lintProfile(doc.section, { spo: doc.spo });
      assert.deepEqual(findings.map((f) => `${f.severity} ${f.rule}`), ['warning signal-window'], `${doc.name}: ${findings.map((f) => f.message).join('; ')}`);
      assert.deepEqual(lintProfile(doc.section, { spo: doc.spo, runtime: 'runc' }).filter((f) => f.severity !== 'info'), [], `${doc.name} under runc`);
    }
  }
});

test('profiles: the example pods are valid and name the profiles where the operator and the kubelet put them', () => {
  const pods = loadYaml('deploy/profiles/example-pod.yaml');
  assert.equal(pods.length, 2);
  for (const m of pods) validateObject(m);
  const sp = loadYaml('deploy/profiles/seccompprofile.yaml')[0].obj;
  const wanted = [`operator/${sp.metadata.namespace}/${sp.metadata.name}.json`, `profiles/${path.basename(PROFILE_FILE)}`];
  assert.deepEqual(pods.map((m) => m.obj.spec.securityContext.seccompProfile), wanted.map((p) => ({ type: 'Localhost', localhostProfile: p })));
  assert.equal(pods[0].obj.metadata.namespace, sp.metadata.namespace);
});

// ---------------------------------------------------------------------------------------------
// systemd

test('systemd: seccomp-agent.socket listens on the data plane default listener socket, 0600, for the data plane service', () => {
  const where = 'deploy/systemd/seccomp-agent.socket';
  const unit = parseUnit(where);
  // The default path first, then the Security Profiles Operator's (as /run/: systemd rewrites /var/run/).
  assert.deepEqual(unit.get('Socket', 'ListenStream'), [DEFAULT_LISTENER_SOCKET, '/run/security-profiles-operator/seccomp-agent.sock']);
  assert.equal(single(unit, 'Socket', 'SocketMode', where), '0600');
  assert.equal(single(unit, 'Socket', 'FileDescriptorName', where), 'listener');
  assert.equal(single(unit, 'Socket', 'Service', where), 'seccomp-dataplane.service');
  assert.equal(single(unit, 'Install', 'WantedBy', where), 'sockets.target');
});

test('systemd: seccomp-dataplane.service is Type=notify with an fd store and flags from DATAPLANE_OPTIONS', () => {
  const where = 'deploy/systemd/seccomp-dataplane.service';
  const unit = parseUnit(where);
  assert.equal(single(unit, 'Service', 'Type', where), 'notify');
  assert.equal(single(unit, 'Service', 'NotifyAccess', where), 'main');
  // Two fds per container (notify fd, record memfd) plus the listener and the journal, for at
  // least the 1,000 containers of issue 2's target; the same room as seccomp-keeper's default.
  const storeMax = Number(single(unit, 'Service', 'FileDescriptorStoreMax', where));
  assert.ok(Number.isInteger(storeMax) && storeMax >= 2 * 1000 + 2, `FileDescriptorStoreMax=${storeMax}`);
  assert.match(read('native/tools/keeper.cpp'), new RegExp(`--max-fds N +most fds kept at once \\(default ${storeMax}\\)`));
  assert.equal(single(unit, 'Service', 'FileDescriptorStorePreserve', where), 'yes');
  assert.equal(single(unit, 'Service', 'Restart', where), 'always');
  // The listener exists (socket unit) before the service and before the container runtimes.
  assert.deepEqual(unit.get('Unit', 'Wants'), ['seccomp-agent.socket']);
  assert.deepEqual(unit.get('Unit', 'After'), ['seccomp-agent.socket']);
  for (const runtime of ['containerd.service', 'crio.service']) {
    assert.ok(single(unit, 'Unit', 'Before', where).split(/\s+/).includes(runtime), `${where}: Before=${runtime}`);
  }
  assert.deepEqual(unit.get('Install', 'Also'), ['seccomp-agent.socket'], 'enabling the service enables its socket');
  const [program, ...args] = single(unit, 'Service', 'ExecStart', where).split(/\s+/);
  assertProgram(program, 'seccomp-dataplane', where);
  const parsed = parseCommandLine(DATAPLANE_OPTIONS, args, {});
  assert.deepEqual(parsed.positional, []);
  const socketUnit = parseUnit('deploy/systemd/seccomp-agent.socket');
  assert.deepEqual(parsed.options.listenerSockets, socketUnit.get('Socket', 'ListenStream'));
  assert.equal(parsed.options.grpcSocket, DEFAULT_GRPC_SOCKET);
  assert.equal(path.posix.join('/run', single(unit, 'Service', 'RuntimeDirectory', where)), path.posix.dirname(DEFAULT_GRPC_SOCKET));
  const bounding = single(unit, 'Service', 'CapabilityBoundingSet', where).split(/\s+/);
  assert.deepEqual(bounding.sort(), documentedCapabilities().map((c) => `CAP_${c}`).sort());
  // No drop-in turns the notify service back into a simple one any more.
  assert.deepEqual(fs.readdirSync(path.join(ROOT, 'deploy/systemd')).sort(), ['seccomp-agent.socket', 'seccomp-controlplane.service', 'seccomp-dataplane.service']);
});

test('systemd: seccomp-controlplane.service follows the data plane; its ExecStart lines use CONTROLPLANE_OPTIONS flags', () => {
  const where = 'deploy/systemd/seccomp-controlplane.service';
  const unit = parseUnit(where);
  assert.deepEqual(unit.get('Unit', 'After'), ['seccomp-dataplane.service']);
  assert.deepEqual(unit.get('Unit', 'Wants'), ['seccomp-dataplane.service']);
  assert.equal(single(unit, 'Service', 'Restart', where), 'always');
  const lines = [single(unit, 'Service', 'ExecStart', where), ...unit.commented('ExecStart')];
  assert.equal(lines.length, 2, 'ExecStart plus the commented alternative for hosts without a cluster');
  const noKubernetes: boolean[] = [];
  for (const line of lines) {
    const [program, ...args] = line.split(/\s+/);
    assertProgram(program, 'seccomp-controlplane', where);
    const parsed = parseCommandLine(CONTROLPLANE_OPTIONS, args, {});
    assert.deepEqual(parsed.positional, []);
    assert.equal(parsed.options.grpcSocket, DEFAULT_GRPC_SOCKET);
    noKubernetes.push(parsed.options.noKubernetes);
  }
  assert.deepEqual(noKubernetes, [false, true]);
  assert.ok(unit.get('Service', 'Environment').includes(`${CONTROLPLANE_OPTIONS.nodeName.env}=%H`));
});

// ---------------------------------------------------------------------------------------------
// Dockerfile

test('Dockerfile: builds on node:20-bookworm with npm ci, runs on node:20-bookworm-slim with production modules', () => {
  const stages = dockerStages();
  assert.deepEqual(stages.map((s) => s.from), ['FROM node:20-bookworm AS build', 'FROM node:20-bookworm-slim']);
  const build = stages[0].text;
  assert.match(build, /\bnpm ci\b/);
  assert.match(build, /\bnpm prune --omit=dev\b/);
  // Everything tsc compiles for the programs (tsconfig's include minus tests and benchmarks)
  // and everything node-gyp compiles must reach the build stage.
  const tsconfig = JSON.parse(read('tsconfig.json')) as { include: string[] };
  const needed = [
    ...tsconfig.include.filter((dir) => !['test', 'bench'].includes(dir)).map((dir) => dir.split('/')[0]),
    'native', 'binding.gyp', 'package.json', 'package-lock.json', 'tsconfig.json', 'bin', 'buf.yaml', 'buf.gen.yaml',
  ];
  const copied = copySources(stages[0]);
  for (const item of new Set(needed)) assert.ok(copied.includes(item), `build stage copies ${item}`);
  const ignore = read('deploy/Dockerfile.dockerignore').split('\n');
  for (const item of copied) {
    assert.ok(ignore.some((line) => line === `!${item}` || line.startsWith(`!${item}/`)), `Dockerfile.dockerignore lets ${item} (or files under it) into the context`);
  }
});

/** Whether deploy/Dockerfile.dockerignore lets `file` into the build context (the last matching line decides). */
function dockerignoreLets(file: string): boolean {
  let lets = true;
  for (const raw of read('deploy/Dockerfile.dockerignore').split('\n')) {
    const line = raw.trim();
    if (line === '' || line.startsWith('#')) continue;
    const negated = line.startsWith('!');
    const pattern = negated ? line.slice(1) : line;
    const regex = new RegExp(`^${pattern.split('**').map((part) => part.split('*').map((s) => s.replace(/[.+?^${}()|[\]\\]/g, '\\$&')).join('[^/]*')).join('.*')}(/.*)?$`);
    if (regex.test(file)) lets = negated;
  }
  return lets;
}

test('Dockerfile: every file node-gyp compiles (the test and bench programs too, since npm ci builds every target) reaches the build stage, and no TypeScript beside them', () => {
  const copied = copySources(dockerStages()[0]);
  const gyp = JSON.parse(read('binding.gyp')) as { targets: Array<{ target_name: string; sources?: string[] }> };
  const sources = gyp.targets.flatMap((t) => (t.sources ?? []).map((source) => {
    const listed = /^<!@\(ls -1 (\S+)\)$/.exec(source); // a directory listing: its files
    return listed ? path.posix.dirname(listed[1]) : source;
  }));
  assert.ok(sources.length > 10, `binding.gyp's sources: ${sources.join(', ')}`);
  for (const source of sources) {
    assert.ok(copied.some((item) => source === item || source.startsWith(`${item}/`)), `the build stage copies ${source} (copies ${copied.join(', ')})`);
    if (source.endsWith('.cpp')) assert.ok(dockerignoreLets(source), `Dockerfile.dockerignore lets ${source} into the context`);
  }
  // tsc compiles tsconfig's include: a test program's TypeScript would import test/support, which the image lacks.
  for (const file of ['test/cmd/test-control-plane/main.ts', 'test/support/processes.ts', 'bench/run.ts']) {
    assert.ok(!dockerignoreLets(file), `Dockerfile.dockerignore keeps ${file} out`);
  }
});

test('Dockerfile: the runtime image holds what the programs load at run time, built by binding.gyp', () => {
  const runtime = dockerStages()[1];
  const workdir = path.posix.dirname(imageBinDir());
  const copied = copySources(runtime, 'build').map((p) => path.posix.relative(workdir, p));
  // package.json: common/version.ts; proto/gen: the descriptor sets the gRPC reflection service serves.
  for (const item of ['package.json', 'node_modules', 'dist', 'bin', 'proto/gen/seccompagent.binpb', 'proto/gen/health.binpb']) {
    assert.ok(copied.includes(item), `runtime stage copies ${item} (has ${copied.join(', ')})`);
  }
  const gyp = JSON.parse(read('binding.gyp')) as { targets: Array<{ target_name: string; type?: string }> };
  const addons = gyp.targets.filter((t) => t.type === undefined).map((t) => t.target_name);
  assert.deepEqual(addons.sort(), ['seccomp_agent', 'seccomp_channel_io', 'seccomp_emulator_addon']);
  assert.ok(copied.includes('build/Release/seccomp_agent.node'), 'the addon');
  // The control plane's: it reads the decision channel with it while it polls (controlplane/link/channel-connection.ts).
  assert.ok(copied.includes('build/Release/seccomp_channel_io.node'), 'the channel addon');
  assert.match(dockerStages()[0].text, /test -f build\/Release\/seccomp_channel_io\.node/);
  assert.ok(!copied.some((p) => p.includes('seccomp_emulator_addon') || p === 'build' || p === 'build/Release'), 'not the test-only addon');
  for (const tool of ['seccomp-run', 'seccomp-nshelper', 'seccomp-keeper']) {
    assert.ok(gyp.targets.some((t) => t.target_name === tool && t.type === 'executable'), `${tool} is a binding.gyp executable`);
    assert.ok(copied.includes(`build/Release/${tool}`), `runtime stage copies ${tool}`);
  }
  assert.match(read('bin/seccomp-run'), /build\/Release\/seccomp-run/);
  // The DaemonSet's entrypoint: bin/seccomp-keeper execs the native keeper, which the build stage checks for.
  assert.match(read('bin/seccomp-keeper'), /^exec "[^\n]*\/build\/Release\/seccomp-keeper" "\$@"$/m);
  assert.match(dockerStages()[0].text, /test -x build\/Release\/seccomp-keeper/);
});

// ---------------------------------------------------------------------------------------------
// deploy/crds: the policy resources

const CRD_FILES = ['deploy/crds/seccompnotifypolicies.yaml', 'deploy/crds/clusterseccompnotifypolicies.yaml'];
const crds = (): Manifest[] => CRD_FILES.flatMap(loadYaml);
const crd = (kind: string): Json => {
  const found = crds().filter((m) => m.obj.spec.names.kind === kind);
  assert.equal(found.length, 1, `exactly one CRD for ${kind}`);
  return found[0].obj;
};
const schemaOf = (kind: string): Json => crd(kind).spec.versions[0].schema.openAPIV3Schema;

/** Structural (apiextensions' rules): every node has a type, below the root no metadata field is constrained, each items/properties is typed. */
function structuralProblems(schema: Json, at: string, out: string[]): string[] {
  if (!schema.type && !schema['x-kubernetes-int-or-string'] && !schema['x-kubernetes-preserve-unknown-fields']) out.push(`${at}: no type`);
  for (const forbidden of ['anyOf', 'oneOf', 'allOf', 'not', '$ref']) if (schema[forbidden]) out.push(`${at}: ${forbidden} is not structural`);
  if (schema.type === 'array' && !schema.items) out.push(`${at}: an array without items`);
  for (const [name, child] of Object.entries((schema.properties ?? {}) as Record<string, Json>)) structuralProblems(child, `${at}.${name}`, out);
  if (schema.items) structuralProblems(schema.items, `${at}[]`, out);
  if (schema.additionalProperties && typeof schema.additionalProperties === 'object') structuralProblems(schema.additionalProperties, `${at}{}`, out);
  return out;
}

/** Every x-kubernetes-validations rule with its schema path, for evaluating with CEL below. */
function validationRules(schema: Json, at: string, out: Array<{ at: string; rule: string; message: string }>): typeof out {
  for (const v of (schema['x-kubernetes-validations'] ?? []) as Json[]) out.push({ at, rule: v.rule, message: v.message });
  for (const [name, child] of Object.entries((schema.properties ?? {}) as Record<string, Json>)) validationRules(child, `${at}.${name}`, out);
  if (schema.items) validationRules(schema.items, `${at}[]`, out);
  return out;
}

/** Evaluates the rules at `at` with `self` bound to `value`, as the API server does on create. */
function violations(kind: string, at: string, value: unknown): string[] {
  const env = celEnv({ variables: { self: mapType(CelScalar.STRING, CelScalar.DYN) } });
  const toCel = (v: unknown): unknown =>
    Array.isArray(v) ? v.map(toCel) : v !== null && typeof v === 'object' ? new Map(Object.entries(v).map(([k, x]) => [k, toCel(x)])) : typeof v === 'number' ? BigInt(v) : v;
  const out: string[] = [];
  for (const r of validationRules(schemaOf(kind), '', []).filter((x) => x.at === at)) {
    const result = planCel(env, parseCel(r.rule))({ self: toCel(value) as never });
    assert.ok(!isCelError(result), `${kind} ${at}: rule ${r.rule} failed to evaluate: ${isCelError(result) ? result.message : ''}`);
    if (result !== true) out.push(r.message);
  }
  return out;
}

test('deploy/crds: both CRDs are valid CustomResourceDefinitions (kubernetes-models), with no unknown field', () => {
  const all = crds();
  assert.deepEqual(all.map((m) => m.obj.kind), ['CustomResourceDefinition', 'CustomResourceDefinition']);
  for (const m of all) validateObject(m);
  const [k] = loadYaml('deploy/crds/kustomization.yaml');
  assert.deepEqual([...k.obj.resources].sort(), CRD_FILES.map((f) => path.basename(f)).sort());
});

test('deploy/crds: group seccompagent.dev v1alpha1; SeccompNotifyPolicy namespaced, ClusterSeccompNotifyPolicy cluster-scoped; status subresource', () => {
  for (const [kind, plural, scope] of [['SeccompNotifyPolicy', 'seccompnotifypolicies', 'Namespaced'], ['ClusterSeccompNotifyPolicy', 'clusterseccompnotifypolicies', 'Cluster']]) {
    const c = crd(kind);
    assert.equal(c.metadata.name, `${plural}.seccompagent.dev`);
    assert.equal(c.spec.group, 'seccompagent.dev');
    assert.equal(c.spec.scope, scope);
    assert.equal(c.spec.names.plural, plural);
    assert.deepEqual(c.spec.versions.map((v: Json) => [v.name, v.served, v.storage]), [['v1alpha1', true, true]]);
    assert.deepEqual(c.spec.versions[0].subresources, { status: {} });
    assert.deepEqual(structuralProblems(schemaOf(kind), kind, []), [], `${kind}: a structural schema`);
    const spec = schemaOf(kind).properties.spec.properties;
    assert.equal(spec.mode.default, 'Enforce');
    assert.deepEqual(spec.mode.enum, ['Enforce', 'Audit']);
    assert.deepEqual(Object.keys(spec.rules.items.properties).sort(), ['allow', 'errno', 'failurePolicy', 'freeze', 'kill', 'log', 'mkdir', 'mount', 'name', 'syscalls', 'when']);
    assert.deepEqual(Object.keys(spec.selector.properties).sort(), ['namespaceSelector', 'podSelector']);
    assert.deepEqual(spec.selector.properties.podSelector.properties.matchExpressions.items.properties.operator.enum, ['In', 'NotIn', 'Exists', 'DoesNotExist']);
  }
  // One schema for both, apart from the namespaceSelector rule of the namespaced kind.
  const namespaced = structuredClone(schemaOf('SeccompNotifyPolicy'));
  const cluster = structuredClone(schemaOf('ClusterSeccompNotifyPolicy'));
  delete namespaced.properties.spec.properties.selector['x-kubernetes-validations'];
  for (const s of [namespaced, cluster]) {
    delete s.description;
    delete s.properties.spec.properties.selector.description;
  }
  assert.deepEqual(namespaced, cluster);
});

test('deploy/crds: failurePolicy Fail|Ignore only with when, and when refuses counted repetitions of 100 or more at admission (issue 17)', () => {
  const rule = '.spec.rules[]';
  for (const kind of ['SeccompNotifyPolicy', 'ClusterSeccompNotifyPolicy']) {
    assert.deepEqual(schemaOf(kind).properties.spec.properties.rules.items.properties.failurePolicy.enum, ['Fail', 'Ignore']);
    assert.deepEqual(violations(kind, rule, { syscalls: ['mkdir'], when: 'paths[0].startsWith("/etc")', errno: 'EPERM', failurePolicy: 'Ignore' }), []);
    assert.deepEqual(violations(kind, rule, { syscalls: ['mkdir'], errno: 'EPERM', failurePolicy: 'Fail' }), ['failurePolicy applies only to a rule with when']);
    assert.equal(violations(kind, rule, { syscalls: ['mkdir'], when: `paths[0].matches("${'[a-z]{1000}'.repeat(8)}")`, errno: 'EPERM' }).length, 1);
    assert.deepEqual(violations(kind, rule, { syscalls: ['mkdir'], when: 'paths[0].matches("^/etc/[a-z]{2,20}$")', errno: 'EPERM' }), []);
  }
});

test('deploy/crds: one policy cannot hold more rules than the cluster share of the data plane\'s 1,024 (mount rules count per filesystem) (issue 17)', () => {
  const mount = { syscalls: ['mount'], mount: { filesystems: Array.from({ length: 16 }, (_, i) => `fs${i}`) } };
  for (const kind of ['SeccompNotifyPolicy', 'ClusterSeccompNotifyPolicy']) {
    const rules = schemaOf(kind).properties.spec.properties.rules;
    assert.equal(rules.maxItems, 64);
    assert.equal(rules.items.properties.mount.properties.filesystems.maxItems, 16);
    assert.deepEqual(violations(kind, '.spec.rules', Array.from({ length: 8 }, () => mount)), []);
    assert.equal(violations(kind, '.spec.rules', Array.from({ length: 9 }, () => mount)).length, 1);
    // The worst an object can hold now: 56 + 8 x 16 native rules, within the cluster share.
    assert.ok(56 + 8 * 16 <= 192);
  }
});

test('deploy/crds: the errno enum is the errno table the control plane reads', async () => {
  const { ERRNO_BY_NAME } = await import('../../common/errors');
  assert.deepEqual([...schemaOf('SeccompNotifyPolicy').properties.spec.properties.rules.items.properties.errno.enum].sort(), Object.keys(ERRNO_BY_NAME).sort());
});

test('deploy/crds: CEL validation rules: exactly one action per rule, mkdir and mount only for their syscalls, namespaceSelector only on the cluster kind, selector operators', () => {
  const rule = '.spec.rules[]';
  for (const kind of ['SeccompNotifyPolicy', 'ClusterSeccompNotifyPolicy']) {
    assert.deepEqual(violations(kind, rule, { syscalls: ['mkdir'], errno: 'EPERM' }), []);
    assert.deepEqual(violations(kind, rule, { syscalls: ['mkdir'], when: 'paths[0].startsWith("/etc")', allow: {} }), []);
    assert.deepEqual(violations(kind, rule, { syscalls: ['mkdir'] }), ['a rule has exactly one action: allow, errno, kill, freeze, mkdir, mount or log']);
    assert.deepEqual(violations(kind, rule, { syscalls: ['mkdir'], errno: 'EPERM', kill: {} }), ['a rule has exactly one action: allow, errno, kill, freeze, mkdir, mount or log']);
    assert.deepEqual(violations(kind, rule, { syscalls: ['mkdir', 'mkdirat'], mkdir: { suffix: '-{{.Pod}}' } }), []);
    assert.deepEqual(violations(kind, rule, { syscalls: ['mkdir', 'unlink'], mkdir: { suffix: '-x' } }), ['the mkdir action only answers mkdir and mkdirat']);
    assert.deepEqual(violations(kind, rule, { syscalls: ['mount'], mount: { filesystems: ['proc'] } }), []);
    assert.deepEqual(violations(kind, rule, { syscalls: ['umount2'], mount: { filesystems: ['proc'] } }), ['the mount action only answers mount']);
    assert.deepEqual(violations(kind, `${rule}.syscalls`, ['mkdir']), []);
    assert.deepEqual(violations(kind, `${rule}.syscalls`, ['mkdir', '']), ['syscall names are not empty']);
    const expr = '.spec.selector.podSelector.matchExpressions[]';
    assert.deepEqual(violations(kind, expr, { key: 'app', operator: 'In', values: ['web'] }), []);
    assert.deepEqual(violations(kind, expr, { key: 'app', operator: 'Exists' }), []);
    assert.equal(violations(kind, expr, { key: 'app', operator: 'In' }).length, 1);
    assert.equal(violations(kind, expr, { key: 'app', operator: 'Exists', values: ['x'] }).length, 1);
  }
  const selector = { podSelector: { matchLabels: { app: 'web' } }, namespaceSelector: { matchLabels: { team: 'a' } } };
  assert.deepEqual(violations('ClusterSeccompNotifyPolicy', '.spec.selector', selector), []);
  assert.deepEqual(violations('SeccompNotifyPolicy', '.spec.selector', selector), ['namespaceSelector is only for ClusterSeccompNotifyPolicy; a SeccompNotifyPolicy applies to its own namespace']);
  assert.deepEqual(violations('SeccompNotifyPolicy', '.spec.selector', { podSelector: {} }), []);
});
