/**
 * The one place where TarcilError codes become gRPC status, and back (a client's view of a status).
 */
import * as grpc from '@grpc/grpc-js';
import { boundedMessage, errorMessage, isTarcilError, QUOTE_CHARS, TarcilError, type ErrorCode } from '../util/errors.ts';
import { clip, wellFormed } from '../util/text.ts';

const CODES: Record<ErrorCode, grpc.status> = {
  INVALID_ARGUMENT: grpc.status.INVALID_ARGUMENT,
  NOT_FOUND: grpc.status.NOT_FOUND,
  ALREADY_EXISTS: grpc.status.ALREADY_EXISTS,
  FAILED_PRECONDITION: grpc.status.FAILED_PRECONDITION,
  UNAUTHENTICATED: grpc.status.UNAUTHENTICATED,
  PERMISSION_DENIED: grpc.status.PERMISSION_DENIED,
  RESOURCE_EXHAUSTED: grpc.status.RESOURCE_EXHAUSTED,
  UNAVAILABLE: grpc.status.UNAVAILABLE,
  DEADLINE_EXCEEDED: grpc.status.DEADLINE_EXCEEDED,
  COMPACTED: grpc.status.UNAVAILABLE,
  CANCELLED: grpc.status.CANCELLED,
  ABORTED: grpc.status.ABORTED,
  TOO_MANY_OPS: grpc.status.RESOURCE_EXHAUSTED,
  LEASE_NOT_FOUND: grpc.status.UNAVAILABLE,
  CLOSED: grpc.status.UNAVAILABLE,
  INTERNAL: grpc.status.INTERNAL,
};

/** A gRPC status a client received, as the TarcilError it stands for (the inverse of toStatus). */
export function errorFromStatus(err: { code?: number; details?: string; message?: string }): TarcilError {
  const entry = Object.entries(CODES).find(([, c]) => c === err.code);
  return new TarcilError((entry?.[0] as ErrorCode | undefined) ?? 'INTERNAL', err.details || err.message || 'error');
}

/**
 * Text as a metadata value may hold it: grpc-js takes printable ASCII only (and throws on
 * anything else, before the status is sent). A field names a user's map key, which may hold any
 * character: each outside printable ASCII, and `%`, is percent-encoded as UTF-8, after the
 * text is cut to QUOTE_CHARS whole characters.
 */
export function headerText(s: string): string {
  const cut = s.length > QUOTE_CHARS ? `${clip(s, QUOTE_CHARS)}...` : wellFormed(s);
  return cut.replace(/[^ -$&-~]/gu, (c) => encodeURIComponent(c));
}

/**
 * The API edge: TarcilError codes become gRPC status here and nowhere else. The message and the
 * field are bounded (boundedMessage, headerText): they travel as headers, and a request's own values
 * may be in them.
 */
export function toStatus(err: unknown): Partial<grpc.StatusObject> {
  const metadata = new grpc.Metadata();
  if (isTarcilError(err)) {
    if (err.field) metadata.set('tarcil-field', headerText(err.field));
    return { code: CODES[err.code], details: boundedMessage(err.message), metadata };
  }
  return { code: grpc.status.INTERNAL, details: boundedMessage(errorMessage(err)), metadata };
}

/**
 * Ends a server stream with an error status. Emitting 'error' is how grpc-js sends a status on a
 * server stream; destroy() would close it without one, and the client would wait forever.
 */
export function endStreamWithError(call: { emit(event: 'error', err: Error): boolean }, err: unknown): void {
  const st = toStatus(err);
  call.emit('error', Object.assign(new Error(st.details ?? 'error'), st));
}
