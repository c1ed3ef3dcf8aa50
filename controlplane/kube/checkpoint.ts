// The node checkpoint: the last synced pods, namespaces and policies (and the policy generations
// in force, when the latest does not compile), so a control plane that starts while the API
// server is unreachable decides as before. One JSON file in --state-dir (the DaemonSet's
// hostPath), written atomically (a temporary file, fsync, rename, fsync of the directory) with
// mode 0600, asynchronously and never on the notification path; read once at start. A file that
// does not parse, is cut short or fails its checksum is refused (AgentError ECHECKPOINT_CORRUPT)
// and the control plane starts without it.
import { createHash, randomBytes } from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { AgentError } from '../../common/errors';
import type { CachedPod } from './pod-cache';
import type { CachedNamespace, PolicyObject } from '../policy/resources/objects';

export const CHECKPOINT_FILE = 'controlplane-checkpoint.json';
const FORMAT = 'seccomp-agent.controlplane-checkpoint/v1';

export interface CheckpointContent {
  /** ISO time of the write. */
  readonly writtenAt: string;
  readonly node: string;
  /** The API server URL the content came from. */
  readonly server: string;
  readonly pods: readonly CachedPod[];
  readonly namespaces: readonly CachedNamespace[];
  readonly policies: readonly PolicyObject[];
  /** The generation in force of each policy whose latest generation did not compile. */
  readonly inForce: readonly PolicyObject[];
}

/** Pods with their container map as pairs (JSON has no Map). */
function encodeBody(content: CheckpointContent): string {
  return JSON.stringify({ ...content, pods: content.pods.map((p) => ({ ...p, containers: [...p.containers] })) });
}

function decodeBody(body: unknown, file: string): CheckpointContent {
  const b = body as Record<string, unknown>;
  const list = (name: string) => {
    if (!Array.isArray(b?.[name])) throw corrupt(file, `has no ${name} list`);
    return b[name] as Array<Record<string, unknown>>;
  };
  if (typeof b?.writtenAt !== 'string' || typeof b.node !== 'string' || typeof b.server !== 'string') throw corrupt(file, 'has no writtenAt, node or server');
  const pods = list('pods').map((p) => {
    if (typeof p.uid !== 'string' || typeof p.pod !== 'string' || typeof p.namespace !== 'string' || !Array.isArray(p.containers)) throw corrupt(file, 'has a pod without uid, name, namespace or containers');
    return Object.freeze({
      namespace: p.namespace,
      pod: p.pod,
      uid: p.uid,
      containers: new Map(p.containers as Array<[string, string]>),
      mirrorHash: typeof p.mirrorHash === 'string' ? p.mirrorHash : null,
      labels: Object.freeze({ ...((p.labels as Record<string, string>) ?? {}) }),
      annotations: Object.freeze({ ...((p.annotations as Record<string, string>) ?? {}) }),
    });
  });
  const policy = (p: Record<string, unknown>): PolicyObject => {
    if ((p.scope !== 'namespaced' && p.scope !== 'cluster') || typeof p.name !== 'string' || typeof p.generation !== 'number') throw corrupt(file, 'has a policy without scope, name or generation');
    return Object.freeze({ scope: p.scope, namespace: String(p.namespace ?? ''), name: p.name, uid: String(p.uid ?? ''), generation: p.generation, spec: p.spec ?? null, ready: (p.ready as PolicyObject['ready']) ?? null });
  };
  const namespaces = list('namespaces').map((n) => {
    if (typeof n.name !== 'string') throw corrupt(file, 'has a namespace without a name');
    return Object.freeze({ name: n.name, labels: Object.freeze({ ...((n.labels as Record<string, string>) ?? {}) }) });
  });
  return Object.freeze({ writtenAt: b.writtenAt, node: b.node, server: b.server, pods, namespaces, policies: list('policies').map(policy), inForce: list('inForce').map(policy) });
}

function corrupt(file: string, what: string): AgentError {
  return new AgentError('ECHECKPOINT_CORRUPT', `checkpoint ${file} ${what}: refused; starting without it (the API server's lists replace it once they succeed)`);
}

/** Reads the checkpoint; null when there is none. Throws AgentError ECHECKPOINT_CORRUPT. */
export function readCheckpoint(dir: string): CheckpointContent | null {
  const file = path.join(dir, CHECKPOINT_FILE);
  let text: string;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw new AgentError('ECHECKPOINT_CORRUPT', `checkpoint ${file} cannot be read (${(err as Error).message}): starting without it`, { cause: err });
  }
  let outer: { format?: unknown; sha256?: unknown; body?: unknown };
  try {
    outer = JSON.parse(text);
  } catch (err) {
    throw corrupt(file, `is not JSON (${(err as Error).message}; cut short?)`);
  }
  if (outer?.format !== FORMAT) throw corrupt(file, `is not a ${FORMAT} file`);
  if (typeof outer.body !== 'string' || typeof outer.sha256 !== 'string') throw corrupt(file, 'has no body or checksum');
  if (createHash('sha256').update(outer.body).digest('hex') !== outer.sha256) throw corrupt(file, 'fails its sha256 checksum');
  let body: unknown;
  try {
    body = JSON.parse(outer.body);
  } catch (err) {
    throw corrupt(file, `has a body that is not JSON (${(err as Error).message})`);
  }
  return decodeBody(body, file);
}

/**
 * The state directory must be a directory, not a symlink to one (lstat). One that is ours and that
 * group or others may write is made 0700; one of another owner is used as it is, since the
 * temporary file is created with O_EXCL | O_NOFOLLOW under a random name and renamed (rename
 * replaces a planted link, never follows it).
 */
async function checkStateDir(dir: string): Promise<void> {
  const st = await fs.promises.lstat(dir);
  if (st.isSymbolicLink() || !st.isDirectory()) {
    throw new AgentError('ECHECKPOINT_DIR', `state directory ${dir} is ${st.isSymbolicLink() ? 'a symlink' : 'not a directory'}; the checkpoint is not written there`);
  }
  if (typeof process.geteuid === 'function' && st.uid === process.geteuid() && (st.mode & 0o022) !== 0) await fs.promises.chmod(dir, 0o700);
}

/** Writes the checkpoint atomically: tmp file (0600), fsync, rename over the old one, fsync of the directory. */
export async function writeCheckpoint(dir: string, content: CheckpointContent): Promise<void> {
  const body = encodeBody(content);
  const text = JSON.stringify({ format: FORMAT, sha256: createHash('sha256').update(body).digest('hex'), body });
  // The state directory itself, never its parents: a parent that is gone (an unmounted hostPath,
  // a removed scratch dir) is an error to report, not a tree to recreate.
  await fs.promises.mkdir(dir, { mode: 0o700 }).catch((err: NodeJS.ErrnoException) => {
    if (err.code !== 'EEXIST') throw err;
  });
  await checkStateDir(dir);
  const file = path.join(dir, CHECKPOINT_FILE);
  // A fresh name nobody can guess, created here or not at all: never through a symlink or a file
  // someone else planted in a directory others may write (an emptyDir is 0777).
  const tmp = `${file}.tmp-${process.pid}-${randomBytes(8).toString('hex')}`;
  const handle = await fs.promises.open(tmp, fs.constants.O_WRONLY | fs.constants.O_CREAT | fs.constants.O_EXCL | fs.constants.O_NOFOLLOW, 0o600);
  try {
    await handle.writeFile(text);
    await handle.chmod(0o600);
    await handle.sync();
  } finally {
    await handle.close();
  }
  try {
    await fs.promises.rename(tmp, file);
  } catch (err) {
    await fs.promises.rm(tmp, { force: true });
    throw err;
  }
  const dirHandle = await fs.promises.open(dir, 'r');
  try {
    await dirHandle.sync();
  } finally {
    await dirHandle.close();
  }
}
