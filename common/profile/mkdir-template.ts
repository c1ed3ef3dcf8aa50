// MKDIR_TMPL: the suffix kinvolk/seccompagent profiles append to the directory a container
// creates, written as a Go text/template over the pod identity ("-{{.Namespace}}-{{.Pod}}").
// Only field references are supported (with Go's "{{- " and " -}}" trim markers); the output must
// be a plain name suffix, so a template can never send a mkdir to another directory.
import { AgentError } from '../errors';

export type TemplateField = 'Namespace' | 'Pod' | 'Container';

export interface TemplateValues {
  readonly namespace: string;
  readonly pod: string;
  /** null while the container's name is unknown (not yet in the pod status). */
  readonly container: string | null;
}

type TemplatePart = { readonly text: string } | { readonly field: TemplateField };

export interface MkdirTemplate {
  readonly source: string;
  readonly parts: readonly TemplatePart[];
  /** Fields the template reads: a container is ready for it once all of them are known. */
  readonly fields: ReadonlySet<TemplateField>;
}

const FIELDS: readonly TemplateField[] = ['Namespace', 'Pod', 'Container'];
const NAME_MAX = 255;

function templateError(source: string, what: string): AgentError {
  return new AgentError(
    'EMKDIR_TEMPLATE',
    `MKDIR_TMPL "${source}": ${what}; the template is ignored and mkdir is not rewritten for this container`,
  );
}

/** Parses a template once per container policy; throws AgentError EMKDIR_TEMPLATE. */
export function parseMkdirTemplate(source: string): MkdirTemplate {
  const parts: Array<{ text: string } | { field: TemplateField }> = [];
  const fields = new Set<TemplateField>();
  let text = '';
  let trimNext = false;
  let at = 0;
  while (at < source.length) {
    const open = source.indexOf('{{', at);
    let literal = source.slice(at, open === -1 ? undefined : open);
    if (trimNext) literal = literal.replace(/^\s+/, '');
    text += literal;
    trimNext = false;
    if (open === -1) break;
    const close = source.indexOf('}}', open + 2);
    if (close === -1) throw templateError(source, `unclosed action at offset ${open}`);
    let action = source.slice(open + 2, close);
    if (/^-\s/.test(action)) {
      text = text.replace(/\s+$/, '');
      action = action.slice(1);
    }
    if (/\s-$/.test(action)) {
      trimNext = true;
      action = action.slice(0, -1);
    }
    action = action.trim();
    const reference = /^\.([A-Za-z_][A-Za-z0-9_]*)$/.exec(action);
    if (!reference) {
      throw templateError(source, `"{{${action}}}" is not supported: only {{.Namespace}}, {{.Pod}} and {{.Container}} are`);
    }
    const field = reference[1] as TemplateField;
    if (!FIELDS.includes(field)) {
      throw templateError(source, `unknown field .${reference[1]}: use .Namespace, .Pod or .Container`);
    }
    if (text !== '') parts.push({ text });
    text = '';
    parts.push({ field });
    fields.add(field);
    at = close + 2;
  }
  if (text !== '') parts.push({ text });
  return Object.freeze({ source, parts: Object.freeze(parts.map((part) => Object.freeze(part))), fields });
}

/**
 * Refuses anything but a plain name suffix: empty, a slash, NUL, a name made of dots only
 * ("." and ".." are path elements, and "." appended to "." would be ".."), or longer than a name
 * may be. Throws AgentError EMKDIR_SUFFIX.
 */
export function checkNameSuffix(suffix: string, what = 'suffix'): void {
  let problem: string | null = null;
  if (suffix === '') problem = 'is empty';
  else if (suffix.includes('/')) problem = 'contains "/"';
  else if (suffix.includes('\0')) problem = 'contains NUL';
  else if (/^\.+$/.test(suffix)) problem = 'is a path element made of dots';
  else if (Buffer.byteLength(suffix, 'utf8') > NAME_MAX) problem = `is longer than ${NAME_MAX} bytes`;
  if (problem !== null) {
    throw new AgentError(
      'EMKDIR_SUFFIX',
      `${what} ${JSON.stringify(suffix)}, which ${problem}: not a plain name suffix, so it is refused and mkdir is not rewritten`,
    );
  }
}

/**
 * The suffix for one container. Throws AgentError EMKDIR_VALUE_UNKNOWN when a field it reads is
 * not known yet (the caller waits for the pod cache), EMKDIR_SUFFIX when the output is unsafe.
 */
export function renderMkdirTemplate(template: MkdirTemplate, values: TemplateValues): string {
  let out = '';
  for (const part of template.parts) {
    if ('text' in part) {
      out += part.text;
      continue;
    }
    const value = part.field === 'Namespace' ? values.namespace : part.field === 'Pod' ? values.pod : values.container;
    if (value === null) {
      throw new AgentError('EMKDIR_VALUE_UNKNOWN', `MKDIR_TMPL "${template.source}" reads .${part.field}, which is not known yet`);
    }
    out += value;
  }
  checkNameSuffix(out, `MKDIR_TMPL "${template.source}" renders to`);
  return out;
}
