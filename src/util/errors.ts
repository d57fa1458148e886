/**
 * The few named errors of the project. Each has a stable `code`; the API edge maps codes to gRPC
 * status (INVALID_ARGUMENT, NOT_FOUND, UNAVAILABLE, ...), nothing inside the core does.
 */
import { clip, wellFormed } from './text.ts';

export type ErrorCode =
  | 'INVALID_ARGUMENT' // bad job spec, profile, flag or file; `field` names what is wrong
  | 'NOT_FOUND'
  | 'ALREADY_EXISTS' // an id (job, request id) is taken by something else
  | 'FAILED_PRECONDITION' // valid, but can never happen in this cell as it is (a job no server can run)
  | 'RESOURCE_EXHAUSTED' // a limit of the service was reached (a stream client too slow)
  | 'UNAVAILABLE' // the store or a peer cannot be reached
  | 'DEADLINE_EXCEEDED' // a deadline (the caller's, a store call's, a bounded wait) ran out before the answer
  | 'COMPACTED' // a watch asked for history that was compacted away
  | 'CANCELLED'
  | 'ABORTED' // an operation met a concurrent change it must not override (a task placed meanwhile)
  | 'TOO_MANY_OPS' // a transaction exceeds the store's operation limit
  | 'UNAUTHENTICATED' // no valid access token (ACLs on)
  | 'PERMISSION_DENIED' // a valid token whose policy does not allow the call
  | 'LEASE_NOT_FOUND'
  | 'CLOSED'
  | 'INTERNAL';

export class TarcilError extends Error {
  readonly code: ErrorCode;
  readonly field: string | undefined;
  readonly details: Record<string, unknown> | undefined;

  constructor(code: ErrorCode, message: string, opts: { cause?: unknown; field?: string; details?: Record<string, unknown> } = {}) {
    super(message, opts.cause === undefined ? undefined : { cause: opts.cause });
    this.name = 'TarcilError';
    this.code = code;
    this.field = opts.field;
    this.details = opts.details;
  }
}

export function invalid(field: string, rule: string, details?: Record<string, unknown>): TarcilError {
  return new TarcilError('INVALID_ARGUMENT', `${field}: ${rule}`, details ? { field, details } : { field });
}

/** How much of a user's value a message or a log line quotes. */
export const QUOTE_CHARS = 200;

/**
 * A user's value as a message quotes it: whole up to `max` characters, otherwise its start and
 * its length (a 20,000-character name would not fit a gRPC status header).
 */
export function quote(value: unknown, max: number = QUOTE_CHARS): string {
  const s = typeof value === 'string' ? value : errorMessage(value);
  return s.length <= max ? wellFormed(s) : `${clip(s, max)}… (${s.length} characters)`;
}

/** Longest message a status carries (grpc-js refuses headers over 8 KiB; a status's message is one). */
export const MAX_STATUS_CHARS = 1024;

/** A message cut to MAX_STATUS_CHARS, saying how long it was. */
export function boundedMessage(message: string, max: number = MAX_STATUS_CHARS): string {
  return message.length <= max ? wellFormed(message) : `${clip(message, max)}… (message cut: ${message.length} characters in all)`;
}

/** The message of anything thrown: an Error's message, or the value as text. */
export function errorMessage(e: unknown): string {
  if (e instanceof Error) return e.message;
  if (typeof e === 'string') return e;
  try {
    return JSON.stringify(e) ?? String(e);
  } catch {
    return String(e);
  }
}

export function isTarcilError(e: unknown, code?: ErrorCode): e is TarcilError {
  return e instanceof TarcilError && (code === undefined || e.code === code);
}

/**
 * True for an error that may go away when the call is made again: the store or a peer could not
 * be reached (UNAVAILABLE) or did not answer before a deadline (DEADLINE_EXCEEDED, e.g. a store
 * request caught in an etcd leader election). For a write, neither says whether it was applied:
 * retry it blindly only if it is guarded by compares or idempotent (see EtcdStore).
 */
export function isTransient(e: unknown): e is TarcilError {
  return e instanceof TarcilError && (e.code === 'UNAVAILABLE' || e.code === 'DEADLINE_EXCEEDED');
}
