// Finds the seccomp profiles in a file for the linter: an OCI seccomp profile (JSON, as the
// kubelet's Localhost profiles, containerd and Podman read it), a runtime config.json (its
// linux.seccomp), or Security Profiles Operator SeccompProfile objects (YAML, one or more documents).
import { parseAllDocuments } from 'yaml';
import { AgentError } from '../errors';
import type { SeccompSection } from './lint';

export interface ProfileDocument {
  /** "FILE", or "FILE: SeccompProfile NAMESPACE/NAME" for an SPO object. */
  name: string;
  section: SeccompSection;
  /** An SPO SeccompProfile: its listenerPath must also match the operator's pattern. */
  spo: boolean;
}

type Json = Record<string, unknown>;
const isObject = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);

function fromObject(obj: Json, name: string): ProfileDocument | null {
  if (obj.kind === 'SeccompProfile' && isObject(obj.spec)) {
    const meta = isObject(obj.metadata) ? obj.metadata : {};
    return { name: `${name}: SeccompProfile ${meta.namespace ?? 'default'}/${meta.name ?? '?'}`, section: obj.spec as SeccompSection, spo: true };
  }
  if (isObject(obj.linux) && isObject(obj.linux.seccomp)) return { name: `${name}: linux.seccomp`, section: obj.linux.seccomp as SeccompSection, spo: false };
  if (typeof obj.defaultAction === 'string') return { name, section: obj as SeccompSection, spo: false };
  return null;
}

/** The profiles in `text` (read from `name`); throws EPROFILE when there is none or it does not parse. */
export function readProfileDocuments(text: string, name: string): ProfileDocument[] {
  let objects: unknown[];
  const trimmed = text.trimStart();
  if (trimmed.startsWith('{')) {
    try {
      objects = [JSON.parse(text)];
    } catch (err) {
      throw new AgentError('EPROFILE', `${name}: not valid JSON: ${(err as Error).message}`);
    }
  } else {
    const docs = parseAllDocuments(text);
    const broken = docs.find((d) => d.errors.length > 0);
    if (broken) throw new AgentError('EPROFILE', `${name}: not valid YAML: ${broken.errors[0].message}`);
    objects = docs.map((d) => d.toJS() as unknown);
  }
  const found = objects.filter(isObject).map((o) => fromObject(o, name)).filter((p): p is ProfileDocument => p !== null);
  if (found.length === 0) {
    throw new AgentError('EPROFILE', `${name}: no seccomp profile in it (expected an OCI profile with defaultAction, a config.json with linux.seccomp, or an SPO SeccompProfile)`);
  }
  return found;
}
