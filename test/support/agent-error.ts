// The code of the AgentError a call throws ('none' when it throws nothing): tests check codes, not text.
import assert from 'node:assert/strict';
import { AgentError } from '../../common/errors';

export function errorCode(fn: () => unknown): string {
  try {
    fn();
  } catch (err) {
    assert.ok(err instanceof AgentError, `expected an AgentError, got ${String(err)}`);
    return err.code;
  }
  return 'none';
}
