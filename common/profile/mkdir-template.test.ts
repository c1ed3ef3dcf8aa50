import assert from 'node:assert/strict';
import { test } from 'node:test';
import { AgentError } from '../errors';
import { checkNameSuffix, parseMkdirTemplate, renderMkdirTemplate } from './mkdir-template';

const POD = { namespace: 'shop', pod: 'web-1', container: 'nginx' };

function code(fn: () => unknown): string {
  try {
    fn();
  } catch (err) {
    assert.ok(err instanceof AgentError, String(err));
    return err.code;
  }
  return 'none';
}

test('MKDIR_TMPL: the kinvolk/seccompagent example renders', () => {
  const t = parseMkdirTemplate('-{{.Namespace}}-{{.Pod}}-{{.Container}}');
  assert.equal(renderMkdirTemplate(t, POD), '-shop-web-1-nginx');
  assert.deepEqual([...t.fields].sort(), ['Container', 'Namespace', 'Pod']);
  assert.ok(Object.isFrozen(t));
});

test('MKDIR_TMPL: whitespace and Go trim markers inside the braces', () => {
  assert.equal(renderMkdirTemplate(parseMkdirTemplate('-{{ .Namespace }}-{{  .Pod\t}}'), POD), '-shop-web-1');
  assert.equal(renderMkdirTemplate(parseMkdirTemplate('.x  {{- .Pod -}}  y'), POD), '.xweb-1y');
  assert.equal(renderMkdirTemplate(parseMkdirTemplate('plain'), POD), 'plain');
  assert.deepEqual([...parseMkdirTemplate('plain').fields], []);
});

test('MKDIR_TMPL: unknown fields, other actions and unclosed braces are EMKDIR_TEMPLATE', () => {
  assert.equal(code(() => parseMkdirTemplate('-{{.Pid}}')), 'EMKDIR_TEMPLATE');
  assert.equal(code(() => parseMkdirTemplate('-{{.namespace}}')), 'EMKDIR_TEMPLATE');
  assert.equal(code(() => parseMkdirTemplate('-{{if .Pod}}x{{end}}')), 'EMKDIR_TEMPLATE');
  assert.equal(code(() => parseMkdirTemplate('-{{.Pod | printf "%s"}}')), 'EMKDIR_TEMPLATE');
  assert.equal(code(() => parseMkdirTemplate('-{{.Pod')), 'EMKDIR_TEMPLATE');
  assert.equal(code(() => parseMkdirTemplate('-{{}}')), 'EMKDIR_TEMPLATE');
  assert.throws(() => parseMkdirTemplate('-{{.Pid}}'), /unknown field \.Pid/);
});

test('MKDIR_TMPL: output that is not a plain name suffix is EMKDIR_SUFFIX', () => {
  assert.equal(code(() => renderMkdirTemplate(parseMkdirTemplate('/../../etc'), POD)), 'EMKDIR_SUFFIX');
  assert.equal(code(() => renderMkdirTemplate(parseMkdirTemplate('-{{.Pod}}/x'), POD)), 'EMKDIR_SUFFIX');
  assert.equal(code(() => renderMkdirTemplate(parseMkdirTemplate('{{.Pod}}'), { ...POD, pod: '..' })), 'EMKDIR_SUFFIX');
  assert.equal(code(() => renderMkdirTemplate(parseMkdirTemplate('..'), POD)), 'EMKDIR_SUFFIX');
  assert.equal(code(() => renderMkdirTemplate(parseMkdirTemplate('{{.Container}}'), { ...POD, container: '' })), 'EMKDIR_SUFFIX');
  assert.equal(code(() => renderMkdirTemplate(parseMkdirTemplate('-{{.Pod}}'), { ...POD, pod: 'a\0b' })), 'EMKDIR_SUFFIX');
  assert.equal(code(() => renderMkdirTemplate(parseMkdirTemplate('-{{.Pod}}'), { ...POD, pod: 'x'.repeat(255) })), 'EMKDIR_SUFFIX');
  assert.equal(renderMkdirTemplate(parseMkdirTemplate('-{{.Pod}}'), { ...POD, pod: 'x'.repeat(254) }).length, 255);
  // Multi-byte names count in bytes, as the kernel counts them.
  assert.equal(code(() => checkNameSuffix('é'.repeat(128))), 'EMKDIR_SUFFIX');
  assert.doesNotThrow(() => checkNameSuffix('..x'));
  assert.doesNotThrow(() => checkNameSuffix('-a..b'));
});

test('MKDIR_TMPL: a field whose value is not known yet is EMKDIR_VALUE_UNKNOWN', () => {
  const t = parseMkdirTemplate('-{{.Container}}');
  assert.equal(code(() => renderMkdirTemplate(t, { ...POD, container: null })), 'EMKDIR_VALUE_UNKNOWN');
  assert.equal(renderMkdirTemplate(parseMkdirTemplate('-{{.Pod}}'), { ...POD, container: null }), '-web-1');
});
