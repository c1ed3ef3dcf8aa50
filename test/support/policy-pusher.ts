// A bare Attach client that pushes container policies itself (proto/seccompagent/v1/policy.proto):
// for the NACK cases a real control plane never sends, and for tests that need a native rule in
// force without a control plane's policy sources.
import type { TestContext } from 'node:test';
import type { AttachResponse } from '../../proto/gen/seccompagent/v1/dataplane';
import type { ContainerPolicy, PolicyAck, Rule } from '../../proto/gen/seccompagent/v1/policy';
import type { RunningDataPlane } from './dataplane';
import { waitUntil } from './wait';

/** Attaches (policy.v1) and waits for a container; push() resolves with the ACK or NACK. */
export async function attachPusher(t: TestContext, dp: RunningDataPlane, hello: { name?: string; takeover?: boolean } = {}) {
  const call = dp.controlClient.attach();
  t.after(() => call.cancel());
  const acks: PolicyAck[] = [];
  let handles: bigint[] = [];
  let notified = 0;
  call.on('data', (r: AttachResponse) => {
    // A container that registers after the Attach comes as containerAdded, not in the snapshot.
    if (r.message?.$case === 'snapshot') handles = [...handles, ...r.message.snapshot.containers.map((c) => c.handle)];
    if (r.message?.$case === 'containerAdded') handles = [...handles, r.message.containerAdded.handle];
    if (r.message?.$case === 'notifications') notified += r.message.notifications.notifications.length;
    if (r.message?.$case === 'policyAcks') acks.push(...r.message.policyAcks.acks);
  });
  call.on('error', () => undefined);
  call.write({ message: { $case: 'hello', hello: { name: hello.name ?? 'policy-test', version: '0', features: ['policy.v1'], takeover: hello.takeover ?? false } } });
  await waitUntil(() => handles.length > 0, 10_000, 'a container in the snapshot or added after it');
  const push = async (policy: Omit<ContainerPolicy, 'sequence'> & { sequence?: bigint }): Promise<PolicyAck> => {
    const before = acks.length;
    call.write({ message: { $case: 'policies', policies: { policies: [{ sequence: 0n, ...policy }] } } });
    await waitUntil(() => acks.length > before, 10_000, 'the ACK or NACK');
    return acks[before];
  };
  return { push, handle: () => handles[0], notified: () => notified };
}

export const rule = (syscalls: string[], action: NonNullable<Rule['action']>['action']): Rule => ({ syscalls, args: [], paths: [], action: { action }, origin: 'test' });
