// The Welcome feature for mkdir decisions that name a suffix (dataplane.proto MkdirSuffix): a data
// plane that lists it builds the suffixed path itself, with the SuffixedPath its own rules use, so
// the control plane sends the caller's path and the suffix. To a data plane without it the control
// plane sends the whole path, built by its fallback (controlplane/policy/mkdir-path.ts).
export const MKDIR_SUFFIX_FEATURE = 'mkdir-suffix.v1';
