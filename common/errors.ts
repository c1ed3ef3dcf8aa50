// The one error class of the project: a stable string `code` for tests and scripts, and a message
// that says what happened and what the agent does now.
export class AgentError extends Error {
  readonly code: string;

  constructor(code: string, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'AgentError';
    this.code = code;
  }
}

/** errno names the agent accepts on its command lines and in policies, by number. */
export const ERRNO_BY_NAME: Readonly<Record<string, number>> = Object.freeze({
  EPERM: 1, ENOENT: 2, ESRCH: 3, EINTR: 4, EIO: 5, ENXIO: 6, E2BIG: 7, ENOEXEC: 8, EBADF: 9,
  ECHILD: 10, EAGAIN: 11, ENOMEM: 12, EACCES: 13, EFAULT: 14, EBUSY: 16, EEXIST: 17, EXDEV: 18,
  ENODEV: 19, ENOTDIR: 20, EISDIR: 21, EINVAL: 22, ENFILE: 23, EMFILE: 24, ENOTTY: 25,
  EFBIG: 27, ENOSPC: 28, ESPIPE: 29, EROFS: 30, EMLINK: 31, EPIPE: 32, ERANGE: 34,
  ENAMETOOLONG: 36, ENOSYS: 38, ENOTEMPTY: 39, ELOOP: 40, ENOTSUP: 95, EOPNOTSUPP: 95,
  ETIMEDOUT: 110, ECANCELED: 125,
});

/** Parses "EPERM", "eperm" or "1" into a positive errno number. */
export function parseErrno(text: string): number {
  const trimmed = text.trim();
  if (/^\d+$/.test(trimmed)) {
    const value = Number(trimmed);
    if (value > 0 && value < 4096) return value;
  } else {
    const value = ERRNO_BY_NAME[trimmed.toUpperCase()];
    if (value !== undefined) return value;
  }
  throw new AgentError('EINVAL_ERRNO', `"${text}" is not an errno: use a name such as EPERM or a number from 1 to 4095`);
}

/** The name of an errno number, or its number as text. */
export function errnoName(errno: number): string {
  for (const [name, value] of Object.entries(ERRNO_BY_NAME)) if (value === errno) return name;
  return String(errno);
}
