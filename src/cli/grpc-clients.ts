/**
 * The command line's gRPC clients of the Scheduler and NodeMonitor services (the client commands,
 * `tarcil logs --node`; the tests and benchmarks use them too). A front-end's job owners reach the
 * monitors through frontend/node-link.ts instead.
 */
import * as grpc from '@grpc/grpc-js';
import type { NodeMonitorClient } from '../rpc/gen/tarcil/v1/NodeMonitor.ts';
import type { SchedulerClient } from '../rpc/gen/tarcil/v1/Scheduler.ts';
import { clientCredentials } from '../rpc/grpc.ts';
import { CLIENT_DEFAULTS } from '../frontend/options.ts';
import { clientConstructor } from '../rpc/proto-root.ts';

/**
 * A Scheduler client. With a token (`--token`, $TARCIL_TOKEN), every call carries it as
 * `authorization: Bearer <token>` metadata (a front-end with ACLs on needs it; one with ACLs off
 * ignores it).
 */
export function schedulerClient(address: string, tls?: { caFile?: string; certFile?: string; keyFile?: string }, token?: string): SchedulerClient {
  const opts: grpc.ClientOptions = { 'grpc.max_receive_message_length': CLIENT_DEFAULTS.maxResponseBytes, ...(token ? { interceptors: [bearer(token)] } : {}) };
  return new (clientConstructor('tarcil.v1.Scheduler'))(address, clientCredentials(tls), opts) as unknown as SchedulerClient;
}

/** An interceptor adding `authorization: Bearer <token>` to every call's metadata. */
export function bearer(token: string): grpc.Interceptor {
  return (options, nextCall) =>
    new grpc.InterceptingCall(nextCall(options), {
      start: (metadata, listener, next) => {
        metadata.set('authorization', `Bearer ${token}`);
        next(metadata, listener);
      },
    });
}

/** A node's NodeMonitor service, reached directly (`tarcil logs --node`). */
export function nodeMonitorClient(address: string, tls?: { caFile?: string; certFile?: string; keyFile?: string }): NodeMonitorClient {
  return new (clientConstructor('tarcil.v1.NodeMonitor'))(address, clientCredentials(tls), {
    'grpc.max_receive_message_length': CLIENT_DEFAULTS.maxResponseBytes,
  }) as unknown as NodeMonitorClient;
}

type Unary<Req, Res> = (req: Req, opts: grpc.CallOptions, cb: grpc.requestCallback<Res>) => grpc.ClientUnaryCall;

/** Promise form of a unary call with a deadline. */
export function call<Req, Res>(fn: Unary<Req, Res>, self: SchedulerClient, req: Req, deadlineMs: number = CLIENT_DEFAULTS.timeoutMs): Promise<Res> {
  return new Promise((resolve, reject) => {
    fn.call(self, req, { deadline: new Date(Date.now() + deadlineMs) }, (err, res) => {
      if (err) reject(err);
      else if (res === undefined) reject(new Error('empty response'));
      else resolve(res);
    });
  });
}
