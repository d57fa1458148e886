/**
 * The NodeMonitor gRPC service: the owners' fast path to launch and kill tasks on a node's
 * monitor. One service serves one LocalMonitor, or every node of a hollow process, routed by the
 * request's server id. The services of a process are listed in `localNodes`, through which a
 * front-end's owners in the same process call them directly (frontend/node-link.ts).
 */
import type * as grpc from '@grpc/grpc-js';
import type { HollowNodes } from '../monitor/hollow.ts';
import type { LocalMonitor, MonitorSnapshot } from '../monitor/monitor.ts';
import type { LogChunk } from '../monitor/task-logs.ts';
import type { ServerSpec } from '../model/types.ts';
import { invalid, TarcilError } from '../util/errors.ts';
import { clip } from '../util/text.ts';
import type { NodeMonitorHandlers } from '../rpc/gen/tarcil/v1/NodeMonitor.ts';
import { endStreamWithError, unaryStatus } from '../rpc/grpc.ts';
import { loadProtos } from '../rpc/proto.ts';

/** One node as the service sees it. */
export interface ServedNode {
  readonly server: ServerSpec;
  launch(ruIndex: number): Promise<'started' | 'already-running' | 'not-assigned'>;
  kill(job: string, task: number, reason: string): Promise<boolean>;
  snapshot(): MonitorSnapshot;
  readLog(job: string, task: number, follow: boolean, signal: AbortSignal, send: (c: LogChunk) => Promise<void>): Promise<void>;
}

/** The node a request names (`server`, empty when the caller did not say); throws if there is none. */
export type NodeRouter = (server: string) => ServedNode;

/** A single node: a request for another server is refused; one that names none is its own. */
export function singleNode(monitor: LocalMonitor): NodeRouter {
  return (server) => {
    if (server !== '' && server !== monitor.server.id) {
      throw new TarcilError('FAILED_PRECONDITION', `server: this NodeMonitor serves server '${monitor.server.id}', not '${clip(server, 200)}'`, {
        field: 'server',
      });
    }
    return monitor;
  };
}

/** Every live node of a hollow process, by the request's server id (required). */
export function hollowNodes(h: HollowNodes): NodeRouter {
  return (server) => {
    if (server === '') throw invalid('server', 'is required: this NodeMonitor serves many hollow nodes');
    const node = h.node(server);
    if (node) return node;
    if (h.killed(server))
      throw new TarcilError('UNAVAILABLE', `server: hollow node '${clip(server, 200)}' was dropped (a simulated death)`, { field: 'server' });
    throw new TarcilError('NOT_FOUND', `server: no hollow node '${clip(server, 200)}' in this process`, { field: 'server' });
  };
}

export type LaunchRequest = { server: string; job: string; task: number; ruIndex: number; revision: number };
export type KillRequest = { server: string; job: string; task: number; reason: string };

/** LaunchTask on the node a request names, whether it came over gRPC or from this process. */
export function launchOn(route: NodeRouter, r: LaunchRequest): Promise<'started' | 'already-running' | 'not-assigned'> {
  const node = route(r.server);
  if (r.ruIndex >= node.server.rus) throw invalid('ru_index', `must be below ${node.server.rus}`);
  return node.launch(r.ruIndex);
}

/** Why a task is killed (KillTaskRequest.reason; empty: cancelled). It becomes the task's message. */
export const KILL_REASONS: readonly string[] = ['cancelled', 'preempted'];

export function killOn(route: NodeRouter, r: KillRequest): Promise<boolean> {
  if (r.reason !== '' && !KILL_REASONS.includes(r.reason)) throw invalid('reason', `must be one of ${KILL_REASONS.join(', ')} (or empty: cancelled)`);
  return route(r.server).kill(r.job, r.task, r.reason || 'cancelled');
}

/** The NodeMonitor service over the nodes `route` finds. */
export function nodeMonitorHandlers(route: NodeRouter): NodeMonitorHandlers {
  return {
    LaunchTask: (call, cb) => {
      void Promise.resolve()
        .then(() => launchOn(route, call.request))
        .then(
          (status) => cb(null, { status }),
          (e: unknown) => cb(unaryStatus(e)),
        );
    },
    KillTask: (call, cb) => {
      void Promise.resolve()
        .then(() => killOn(route, call.request))
        .then(
          (killed) => cb(null, { killed }),
          (e: unknown) => cb(unaryStatus(e)),
        );
    },
    ReadTaskLog: (call) => {
      const stop = new AbortController();
      call.on('cancelled', () => stop.abort());
      const send = (c: LogChunk): Promise<void> =>
        new Promise((resolve) => {
          // Flow control: wait for the client to take what was written before reading more.
          if (call.write({ stream: c.stream, data: c.data, path: c.path ?? '' })) resolve();
          else call.once('drain', () => resolve());
        });
      void Promise.resolve()
        .then(() => route(call.request.server).readLog(call.request.job, call.request.task, call.request.follow, stop.signal, send))
        .then(
          () => call.end(),
          (e: unknown) => endStreamWithError(call, e),
        );
    },
    GetStats: (call, cb) => {
      let s: MonitorSnapshot;
      try {
        s = route(call.request.server).snapshot();
      } catch (e) {
        cb(unaryStatus(e));
        return;
      }
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

export function addNodeMonitorService(server: grpc.Server, route: NodeRouter): string {
  server.addService(loadProtos().proto.tarcil.v1.NodeMonitor.service, nodeMonitorHandlers(route));
  return 'tarcil.v1.NodeMonitor';
}

/**
 * The NodeMonitor services of this process, by the endpoint they advertise (startMonitor adds
 * each). An owner in the same process (`tarcil up`) calls them directly instead of through a
 * loopback gRPC connection, whose two ends cost about a third of the process's CPU when tasks are
 * short.
 */
export class LocalNodes {
  private readonly byEndpoint = new Map<string, NodeRouter>();

  /** Serves `endpoint` from this process until the returned function is called. */
  add(endpoint: string, route: NodeRouter): () => void {
    this.byEndpoint.set(endpoint, route);
    return () => {
      if (this.byEndpoint.get(endpoint) === route) this.byEndpoint.delete(endpoint);
    };
  }

  get(endpoint: string): NodeRouter | undefined {
    return this.byEndpoint.get(endpoint);
  }
}

/** The monitors started in this process (see LocalNodes). */
export const localNodes = new LocalNodes();
