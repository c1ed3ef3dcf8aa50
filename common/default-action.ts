// The answer given to a notification nobody decided: the data plane's --default-action (no control
// plane, deadline passed) and the control plane's --unresolved-action (pod identity unknown).
// Parsed from and printed as an operator types it; converted to and from the API's DefaultAction.
import type { DefaultAction } from '../proto/gen/seccompagent/v1/dataplane';
import { AgentError, errnoName, parseErrno } from './errors';

export type FallbackAction = { kind: 'continue' } | { kind: 'error'; errno: number };

/** "continue", "errno:EPERM", "error:EACCES", "errno:13". */
export function parseDefaultAction(text: string, flag: string): FallbackAction {
  if (text === 'continue') return { kind: 'continue' };
  const match = /^(?:errno|error):(.+)$/.exec(text);
  if (!match) {
    throw new AgentError('EBAD_OPTION', `--${flag}: "${text}" is not an action: use continue or errno:NAME (errno:EPERM)`);
  }
  return { kind: 'error', errno: parseErrno(match[1]) };
}

/** The text an operator would type for an action ("continue", "errno:EPERM"), for log lines and seccompctl. */
export function formatDefaultAction(action: FallbackAction): string {
  return action.kind === 'continue' ? 'continue' : `errno:${errnoName(action.errno)}`;
}

export function defaultActionToProto(action: FallbackAction): DefaultAction {
  return action.kind === 'continue'
    ? { action: { $case: 'continue', continue: {} } }
    : { action: { $case: 'error', error: { errno: action.errno } } };
}

/** A missing or empty DefaultAction is continue (what the data plane does without one). */
export function defaultActionFromProto(action: DefaultAction | undefined): FallbackAction {
  const a = action?.action;
  return a?.$case === 'error' ? { kind: 'error', errno: a.error.errno } : { kind: 'continue' };
}
