/**
 * The one wrapper every RPC of a tarcil gRPC server runs through (Scheduler, NodeMonitor, health,
 * reflection): `guardServer` replaces the server's `addService`, so no service can be added
 * without it. A handler that throws synchronously, returns a promise that rejects, or answers a
 * unary call twice cannot take the process down:
 *
 * - a TarcilError (a refusal raised a step too early, say while reading the request) becomes its
 *   own status (INVALID_ARGUMENT, NOT_FOUND, ...), exactly as if the handler had answered it;
 * - anything else becomes INTERNAL with an incident id; the error and its stack are logged under
 *   the same id, so a client's report can be matched to the log line;
 * - a unary call is answered once: a later answer is dropped and logged.
 *
 * Streams (server, client and bidirectional) end with the status instead of hanging. A request
 * whose bytes do not parse as its message is refused INVALID_ARGUMENT (grpc-js would answer
 * INTERNAL before any handler runs).
 */
import * as grpc from '@grpc/grpc-js';
import { errorMessage, isTarcilError, TarcilError } from '../util/errors.ts';
import type { Logger } from '../util/log.ts';
import { endStreamWithError, toStatus } from './status.ts';

/** An incident id, `e-` and 8 hex digits (Web Crypto: a client that loads this file loads no node:crypto). */
export function incidentId(): string {
  const b = globalThis.crypto.getRandomValues(new Uint8Array(4));
  return `e-${Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('')}`;
}

/** A fault that is not the client's: what the client is told, and the id it can quote. */
export function internalFault(log: Logger | undefined, rpc: string, err: unknown): Partial<grpc.StatusObject> {
  if (isTarcilError(err)) return toStatus(err);
  const id = incidentId();
  log?.error({ incident: id, rpc, err: errorMessage(err), stack: err instanceof Error ? err.stack : undefined }, 'handler failed');
  return {
    code: grpc.status.INTERNAL,
    details: `internal error in ${rpc} (incident ${id}; the server logged it and goes on serving)`,
    metadata: new grpc.Metadata(),
  };
}

type AnyHandler = (...args: unknown[]) => unknown;
interface Endable {
  emit(event: 'error', err: Error): boolean;
  destroyed?: boolean;
  writableEnded?: boolean;
}

function settle(result: unknown, onError: (e: unknown) => void): void {
  if (result !== null && typeof result === 'object' && typeof (result as { then?: unknown }).then === 'function') {
    (result as Promise<unknown>).then(undefined, onError);
  }
}

/** What a request that does not parse is delivered as (guardServer's deserializer), with why. */
const MALFORMED = Symbol('malformed request');

/** Why the call's request did not parse, or undefined for a request that did. */
function malformed(call: unknown): string | undefined {
  const req = (call as { request?: unknown } | null)?.request;
  return req !== null && typeof req === 'object' && MALFORMED in req ? String(req[MALFORMED]) : undefined;
}

/** The refusal of a request whose bytes do not parse as the method's request message. */
function unparsable(rpc: string, why: string): TarcilError {
  return new TarcilError('INVALID_ARGUMENT', `request: does not parse as the request message of ${rpc} (${why})`, { field: '(request)' });
}

/** `handler` for method `rpc` of shape `def`, wrapped as described in this file's header. */
export function guardHandler(rpc: string, def: { requestStream: boolean; responseStream: boolean }, handler: AnyHandler, log: Logger | undefined): AnyHandler {
  if (!def.responseStream) {
    // Unary and client-streaming: (call, callback).
    return (call: unknown, cb: unknown) => {
      const callback = cb as grpc.sendUnaryData<unknown>;
      let answered = false;
      const once: grpc.sendUnaryData<unknown> = (err, value, trailer, flags) => {
        if (answered) {
          log?.warn({ rpc, err: err?.details }, 'a second answer to one call was dropped');
          return;
        }
        answered = true;
        callback(err, value, trailer, flags);
      };
      const fail = (e: unknown): void => {
        if (answered) {
          internalFault(log, rpc, e);
          return;
        }
        once(internalFault(log, rpc, e));
      };
      const bad = malformed(call);
      if (bad !== undefined) {
        once(toStatus(unparsable(rpc, bad)));
        return;
      }
      try {
        settle(handler(call, once), fail);
      } catch (e) {
        fail(e);
      }
    };
  }
  // Server-streaming and bidirectional: (call).
  return (call: unknown) => {
    const stream = call as Endable;
    const fail = (e: unknown): void => {
      const st = internalFault(log, rpc, e);
      if (stream.destroyed || stream.writableEnded) return;
      endStreamWithError(stream, isTarcilError(e) ? e : Object.assign(new Error(st.details), st));
    };
    const bad = malformed(call);
    if (bad !== undefined) {
      fail(unparsable(rpc, bad));
      return;
    }
    try {
      settle(handler(call), fail);
    } catch (e) {
      fail(e);
    }
  };
}

/** Every service added to `server` from now on runs through guardHandler. */
export function guardServer(server: grpc.Server, log: Logger | undefined): grpc.Server {
  const add = server.addService.bind(server);
  server.addService = (service: grpc.ServiceDefinition, impl: grpc.UntypedServiceImplementation): void => {
    // A request message that does not parse reaches the handler's guard as a marker, which refuses
    // it (INVALID_ARGUMENT) instead of grpc-js's INTERNAL. A method that takes a stream of requests
    // keeps grpc-js's own answer: its messages arrive one by one, after the handler started.
    const def: Record<string, grpc.MethodDefinition<unknown, unknown>> = {};
    for (const [name, m] of Object.entries(service)) {
      def[name] = m.requestStream
        ? m
        : {
            ...m,
            requestDeserialize: (bytes: Buffer): unknown => {
              try {
                return m.requestDeserialize(bytes);
              } catch (e) {
                return { [MALFORMED]: errorMessage(e) };
              }
            },
          };
    }
    const guarded: grpc.UntypedServiceImplementation = {};
    for (const [name, def] of Object.entries(service)) {
      // grpc-js looks a method up by its name in the definition, then by its original (camelCase) name.
      for (const key of [name, def.originalName]) {
        if (key === undefined) continue;
        const h: unknown = impl[key];
        if (typeof h === 'function') guarded[key] = guardHandler(def.path, def, (h as AnyHandler).bind(impl), log) as never;
      }
    }
    add(def, guarded);
  };
  return server;
}
