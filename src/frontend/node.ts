/**
 * The NodeMonitor gRPC service of one node: the owners' fast path to launch and kill tasks on its
 * LocalMonitor.
 */
import * as grpc from '@grpc/grpc-js';
import type { NodeLink } from '../agent/lifecycle.ts';
import type { LocalMonitor } from '../monitor/monitor.ts';
import { invalid } from '../util/errors.ts';
import type { NodeMonitorClient, NodeMonitorHandlers } from './gen/tarcil/v1/NodeMonitor.ts';
import { clientCredentials, unaryStatus } from './grpc.ts';
import { loadProtos } from './proto.ts';

/** The NodeMonitor service of one node, over its LocalMonitor. */
export function nodeMonitorHandlers(monitor: LocalMonitor): NodeMonitorHandlers {
  return {
    LaunchTask: (call, cb) => {
      void Promise.resolve()
        .then(() => {
          const r = call.request;
          if (r.ruIndex >= monitor.server.rus) throw invalid('ru_index', `must be below ${monitor.server.rus}`);
          return monitor.launch(r.ruIndex);
        })
        .then(
          (status) => cb(null, { status }),
          (e: unknown) => cb(unaryStatus(e)),
        );
    },
    KillTask: (call, cb) => {
      void monitor.kill(call.request.job, call.request.task, call.request.reason || 'cancelled').then(
        (killed) => cb(null, { killed }),
        (e: unknown) => cb(unaryStatus(e)),
      );
    },
    GetStats: (_call, cb) => {
      const s = monitor.snapshot();
      cb(null, {
        server: s.server,
        platform: s.platform,
        executor: s.executor,
        rus: s.rus,
        busy: s.busy,
        blocked: s.blocked,
        running: s.running.map((r) => ({ job: r.job, task: r.task, ruIndex: r.ruIndex, startedAtMs: r.startedAt, rate: r.rate, pid: r.pid ?? 0 })),
        started: s.stats.started,
        completed: s.stats.completed,
        failed: s.stats.failed,
        killed: s.stats.killed,
        fenced: s.stats.fenced,
      });
    },
  };
}

export function addNodeMonitorService(server: grpc.Server, monitor: LocalMonitor): string {
  server.addService(loadProtos().proto.tarcil.v1.NodeMonitor.service, nodeMonitorHandlers(monitor));
  return 'tarcil.v1.NodeMonitor';
}

/**
 * How owners reach monitors: one channel per endpoint, short deadlines (the store is the truth,
 * so a slow monitor must not hold up an owner).
 */
export class GrpcNodeLink implements NodeLink {
  private readonly clients = new Map<string, NodeMonitorClient>();
  constructor(private readonly opts: { tls?: { caFile?: string; certFile?: string; keyFile?: string }; deadlineMs?: number } = {}) {}

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

  launch(endpoint: string, req: { job: string; task: number; ruIndex: number; revision: number }): Promise<void> {
    return new Promise((resolve, reject) => {
      this.client(endpoint).LaunchTask(req, { deadline: this.deadline(1000) }, (err) => (err ? reject(err) : resolve()));
    });
  }

  kill(endpoint: string, req: { job: string; task: number; reason: string }): Promise<boolean> {
    return new Promise((resolve, reject) => {
      this.client(endpoint).KillTask(req, { deadline: this.deadline() }, (err, res) => (err ? reject(err) : resolve(res?.killed === true)));
    });
  }

  close(): void {
    for (const c of this.clients.values()) c.close();
    this.clients.clear();
  }
}
