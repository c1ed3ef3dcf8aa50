import assert from 'node:assert/strict';
import { test } from 'node:test';
import { errorCode } from '../test/support/agent-error';
import { defaultActionFromProto, defaultActionToProto, formatDefaultAction, parseDefaultAction } from './default-action';

test('default action: parse accepts continue and errno:NAME, error:NAME, errno:N', () => {
  assert.deepEqual(parseDefaultAction('continue', 'x'), { kind: 'continue' });
  assert.deepEqual(parseDefaultAction('errno:EPERM', 'x'), { kind: 'error', errno: 1 });
  assert.deepEqual(parseDefaultAction('error:eacces', 'x'), { kind: 'error', errno: 13 });
  assert.deepEqual(parseDefaultAction('errno:38', 'x'), { kind: 'error', errno: 38 });
  assert.equal(errorCode(() => parseDefaultAction('kill', 'default-action')), 'EBAD_OPTION');
  assert.equal(errorCode(() => parseDefaultAction('errno:ENOPE', 'default-action')), 'EINVAL_ERRNO');
  assert.equal(errorCode(() => parseDefaultAction('errno:0', 'default-action')), 'EINVAL_ERRNO');
});

test('default action: format is the inverse of parse, and the proto form round-trips', () => {
  for (const text of ['continue', 'errno:EPERM', 'errno:ENOSYS', 'errno:4000']) {
    const action = parseDefaultAction(text, 'x');
    assert.equal(formatDefaultAction(action), text);
    assert.deepEqual(defaultActionFromProto(defaultActionToProto(action)), action);
  }
  assert.deepEqual(defaultActionFromProto(undefined), { kind: 'continue' }, 'no default action in a message: continue');
  assert.deepEqual(defaultActionFromProto({ action: undefined }), { kind: 'continue' });
});
