// deploy/'s files as the deploy tests read them: the Kubernetes manifests (YAML 1.1, like
// kubectl), the DaemonSet's pod spec and containers, the Dockerfile's stages and the systemd units.
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { IContainer } from 'kubernetes-models/v1/Container';
import type { IPodSpec } from 'kubernetes-models/v1/PodSpec';
import { parseAllDocuments, type Document } from 'yaml';
import { DEFAULT_GRPC_SOCKET } from '../../common/shared-options';
import { ROOT } from './paths';

export const read = (rel: string): string => fs.readFileSync(path.join(ROOT, rel), 'utf8');

export type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

export interface Manifest {
  file: string;
  doc: Document;
  obj: Json;
}

/** Every document of a YAML file, parsed as YAML 1.1 like kubectl does (0444 is octal there). */
export function loadYaml(rel: string): Manifest[] {
  const docs = parseAllDocuments(read(rel), { version: '1.1' });
  assert.ok(Array.isArray(docs), `${rel}: not a YAML stream`);
  const out: Manifest[] = [];
  for (const doc of docs) {
    assert.deepEqual(doc.errors.map(String), [], `${rel}: YAML errors`);
    assert.deepEqual(doc.warnings.map(String), [], `${rel}: YAML warnings`);
    if (doc.contents === null) continue;
    out.push({ file: rel, doc, obj: doc.toJS() as Json });
  }
  return out;
}

export const K8S_FILES = ['namespace.yaml', 'serviceaccount.yaml', 'rbac.yaml', 'daemonset.yaml'].map((f) => `deploy/kubernetes/${f}`);

export const kube = (): Manifest[] => K8S_FILES.flatMap(loadYaml);

export const one = (kind: string): Manifest => {
  const found = kube().filter((m) => m.obj.kind === kind);
  assert.equal(found.length, 1, `exactly one ${kind} in deploy/kubernetes`);
  return found[0];
};

export function podSpec(): IPodSpec {
  const spec = one('DaemonSet').obj.spec.template.spec as IPodSpec;
  assert.ok(spec, 'DaemonSet has a pod template spec');
  return spec;
}

export function container(name: string, spec = podSpec()): IContainer {
  const c = [...spec.containers, ...(spec.initContainers ?? [])].find((x) => x.name === name);
  assert.ok(c, `DaemonSet has a container named ${name}`);
  return c;
}

/** The host path behind a path inside a container, through its hostPath volume mounts. */
export function hostPathOf(containerPath: string, c: IContainer, spec = podSpec()): string {
  const mounts = (c.volumeMounts ?? [])
    .filter((m) => containerPath === m.mountPath || containerPath.startsWith(`${m.mountPath.replace(/\/$/, '')}/`))
    .sort((a, b) => b.mountPath.length - a.mountPath.length);
  assert.ok(mounts.length > 0, `${c.name}: ${containerPath} is on no volume mount, so the host never sees it`);
  const volume = (spec.volumes ?? []).find((v) => v.name === mounts[0].name);
  assert.ok(volume?.hostPath, `${c.name}: volume ${mounts[0].name} behind ${containerPath} is not a hostPath`);
  return path.posix.join(volume.hostPath.path, path.posix.relative(mounts[0].mountPath, containerPath));
}

/** The directory the image installs bin/ into, from the runtime stage of deploy/Dockerfile. */
export function imageBinDir(): string {
  const runtime = dockerStages()[1];
  const workdir = /^WORKDIR\s+(\S+)$/m.exec(runtime.text);
  assert.ok(workdir, 'the runtime stage of deploy/Dockerfile sets WORKDIR');
  return path.posix.join(workdir[1], 'bin');
}

export interface Stage {
  from: string;
  text: string;
}

export function dockerStages(): Stage[] {
  const text = read('deploy/Dockerfile').replace(/\\\n/g, ' ');
  return text
    .split(/^(?=FROM )/m)
    .filter((s) => s.startsWith('FROM '))
    .map((s) => ({ from: s.split('\n')[0], text: s }));
}

export interface Unit {
  get(section: string, key: string): string[];
  /** Values of commented-out assignments ("#ExecStart=..."): alternatives offered to the operator. */
  commented(key: string): string[];
}

export function parseUnit(rel: string): Unit {
  const values = new Map<string, string[]>();
  const commented = new Map<string, string[]>();
  let section = '';
  for (const raw of read(rel).split('\n')) {
    const line = raw.trim();
    const header = /^\[(.+)\]$/.exec(line);
    if (header) {
      section = header[1];
      continue;
    }
    const alt = /^#([A-Za-z]+)=(.*)$/.exec(line);
    if (alt) commented.set(alt[1], [...(commented.get(alt[1]) ?? []), alt[2]]);
    if (line === '' || line.startsWith('#') || line.startsWith(';')) continue;
    const eq = line.indexOf('=');
    assert.ok(eq > 0, `${rel}: "${line}" is not KEY=VALUE`);
    const key = `${section}/${line.slice(0, eq)}`;
    values.set(key, [...(values.get(key) ?? []), line.slice(eq + 1)]);
  }
  return {
    get: (s, k) => values.get(`${s}/${k}`) ?? [],
    commented: (k) => commented.get(k) ?? [],
  };
}

export function single(unit: Unit, section: string, key: string, where: string): string {
  const v = unit.get(section, key);
  assert.equal(v.length, 1, `${where}: exactly one ${key}= in [${section}]`);
  return v[0];
}

export const NODE_BY_NODE = 'deploy/kubernetes-node-by-node/kustomization.yaml';

/** A command line of a manifest, with the image's programs and the shared directory moved to where a test has them. */
export function onThisHost(words: string[], sharedDir: string): string[] {
  return words.map((w) => w.replaceAll(`${imageBinDir()}/`, `${path.join(ROOT, 'bin')}/`).replaceAll(path.posix.dirname(DEFAULT_GRPC_SOCKET), sharedDir));
}
