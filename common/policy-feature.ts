// The Hello/Welcome feature for pushed container policy (proto/seccompagent/v1/policy.proto): a
// control plane that lists it pushes ContainerPolicy messages; a data plane that lists it answers
// from them natively and ACKs each one.
export const POLICY_FEATURE = 'policy.v1';
