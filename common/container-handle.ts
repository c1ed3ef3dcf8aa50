// A container's handle: the data plane's number for one notify fd, unique for the life of the
// node's data plane. One type in every hand-written file: a number. The engine allocates handles
// as uint32 (native/addon/engine.hpp), the addon and the decision channel's frames carry them as
// such, a number holds them exactly and is a cheaper Map key than a BigInt on the notification
// path. Only the API's `uint64 handle` (a bigint in ts-proto's generated code, fixed by the proto)
// differs: convert at the gRPC edge with these two, nowhere else.

export type ContainerHandle = number;

/** The API's handle (uint64) as a ContainerHandle. */
export function handleFromProto(handle: bigint): ContainerHandle {
  return Number(handle);
}

/** A ContainerHandle as the API's uint64. */
export function handleToProto(handle: ContainerHandle): bigint {
  return BigInt(handle);
}
