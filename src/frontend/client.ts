/**
 * The gRPC clients of the Scheduler and NodeMonitor services, as the CLI and the job owners use
 * them.
 */
import type * as grpc from '@grpc/grpc-js';
import type { NodeMonitorClient } from './gen/tarcil/v1/NodeMonitor.ts';
import type { SchedulerClient } from './gen/tarcil/v1/Scheduler.ts';
import { clientCredentials } from './grpc.ts';
import { CLIENT_DEFAULTS } from './options.ts';
import { clientConstructor } from './proto-root.ts';

export function schedulerClient(address: string, tls?: { caFile?: string; certFile?: string; keyFile?: string }): SchedulerClient {
  return new (clientConstructor('tarcil.v1.Scheduler'))(address, clientCredentials(tls)) as unknown as SchedulerClient;
}

/** A node's NodeMonitor service, reached directly (`tarcil logs --node`). */
export function nodeMonitorClient(address: string, tls?: { caFile?: string; certFile?: string; keyFile?: string }): NodeMonitorClient {
  return new (clientConstructor('tarcil.v1.NodeMonitor'))(address, clientCredentials(tls)) as unknown as NodeMonitorClient;
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
