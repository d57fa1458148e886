/**
 * How the job owners of a front-end reach the nodes' monitors (GrpcNodeLink, the NodeLink that
 * startScheduler gives the job manager): NodeMonitor calls over gRPC, or directly to a monitor of
 * the same process (`tarcil up`; node/monitor-service.ts LocalNodes).
 */
import * as grpc from '@grpc/grpc-js';
import type { NodeLink } from '../owner/manager.ts';
import { killOn, launchOn, type KillRequest, type LaunchRequest, type LocalNodes } from '../node/monitor-service.ts';
import { clientCredentials } from '../rpc/grpc.ts';
import { loadProtos } from '../rpc/proto.ts';
import { TarcilError } from '../util/errors.ts';
import type { NodeMonitorClient } from '../rpc/gen/tarcil/v1/NodeMonitor.ts';
import type { TaskLogChunk__Output } from '../rpc/gen/tarcil/v1/TaskLogChunk.ts';

/**
 * How owners reach monitors: one channel per endpoint, short deadlines (the store is the truth,
 * so a slow monitor must not hold up an owner). With `local`, a monitor of this process is
 * called directly, on a later turn of the event loop and under the same deadlines.
 */
export class GrpcNodeLink implements NodeLink {
  private readonly clients = new Map<string, NodeMonitorClient>();
  constructor(private readonly opts: { tls?: { caFile?: string; certFile?: string; keyFile?: string }; deadlineMs?: number; local?: LocalNodes } = {}) {}

  private client(endpoint: string): NodeMonitorClient {
    let c = this.clients.get(endpoint);
    if (!c) {
      c = new (loadProtos().proto.tarcil.v1.NodeMonitor)(endpoint, clientCredentials(this.opts.tls));
      this.clients.set(endpoint, c);
    }
    return c;
  }

  private deadline(ms?: number): Date {
    return new Date(Date.now() + (ms ?? this.opts.deadlineMs ?? 2000));
  }

  launch(endpoint: string, req: LaunchRequest): Promise<void> {
    const local = this.opts.local?.get(endpoint);
    if (local) return this.direct(1000, () => launchOn(local, req)).then(() => undefined);
    return new Promise((resolve, reject) => {
      this.client(endpoint).LaunchTask(req, { deadline: this.deadline(1000) }, (err) => (err ? reject(err) : resolve()));
    });
  }

  /** A task's log from a node's monitor, as a stream of chunks (always over gRPC). */
  readLog(endpoint: string, req: { server: string; job: string; task: number; follow: boolean }): grpc.ClientReadableStream<TaskLogChunk__Output> {
    return this.client(endpoint).ReadTaskLog(req);
  }

  kill(endpoint: string, req: KillRequest): Promise<boolean> {
    const local = this.opts.local?.get(endpoint);
    if (local) return this.direct(this.opts.deadlineMs ?? 2000, () => killOn(local, req));
    return new Promise((resolve, reject) => {
      this.client(endpoint).KillTask(req, { deadline: this.deadline() }, (err, res) => (err ? reject(err) : resolve(res?.killed === true)));
    });
  }

  /** A call to a monitor of this process: like the RPC, it runs later and gives up at its deadline. */
  private direct<T>(deadlineMs: number, call: () => Promise<T>): Promise<T> {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new TarcilError('DEADLINE_EXCEEDED', `the monitor did not answer within ${deadlineMs} ms`)), deadlineMs);
      timer.unref();
      setImmediate(() => {
        Promise.resolve()
          .then(call)
          .then(
            (v) => {
              clearTimeout(timer);
              resolve(v);
            },
            (e: unknown) => {
              clearTimeout(timer);
              reject(e instanceof Error ? e : new Error(String(e)));
            },
          );
      });
    });
  }

  close(): void {
    for (const c of this.clients.values()) c.close();
    this.clients.clear();
  }
}
