/**
 * `tarcil node cordon|uncordon|drain <server>` (as `kubectl cordon`/`drain` and `nomad node drain`)
 * and `tarcil logs <job> [task]` (as `kubectl logs`, `nomad alloc logs`): client commands of the
 * front-end's SetNodeScheduling and TaskLogs, or of a node's NodeMonitor directly (`--node`).
 */
import { resolveJobId } from '../tenancy/namespace.ts';
import type * as grpc from '@grpc/grpc-js';
import { nodeMonitorClient, schedulerClient } from './grpc-clients.ts';
import type { Cluster__Output } from '../rpc/gen/tarcil/v1/Cluster.ts';
import type { Server__Output } from '../rpc/gen/tarcil/v1/Server.ts';
import type { SchedulerClient } from '../rpc/gen/tarcil/v1/Scheduler.ts';
import type { TaskLogChunk__Output } from '../rpc/gen/tarcil/v1/TaskLogChunk.ts';
import { errorFromStatus } from '../rpc/grpc.ts';
import { DEFAULT_DRAIN_DEADLINE_MS } from '../frontend/options.ts';
import { invalid, TarcilError } from '../util/errors.ts';
import { fmtMs } from './flags.ts';
import { clientTls } from './client-tls.ts';

interface ClientFlags {
  server: string;
  tlsCa?: string;
  tlsCert?: string;
  tlsKey?: string;
  token?: string;
  timeout: number;
  namespace?: string;
}

type Out = (line: string) => void;

const out: Out = (l) => {
  process.stdout.write(`${l}\n`);
};

function client(o: ClientFlags): SchedulerClient {
  return schedulerClient(o.server, clientTls(o), o.token || undefined);
}

function unary<Res>(timeoutMs: number, invoke: (opts: grpc.CallOptions, cb: grpc.requestCallback<Res>) => unknown): Promise<Res> {
  return new Promise((resolve, reject) => {
    invoke({ deadline: new Date(Date.now() + timeoutMs) }, (err, res) => {
      if (err) reject(errorFromStatus(err));
      else if (!res) reject(new TarcilError('INTERNAL', 'empty response'));
      else resolve(res);
    });
  });
}

const utc = (ms: number): string => `${new Date(ms).toISOString().slice(11, 19)} UTC`;

/** Lines `tarcil cluster` adds under its table: each cordoned or draining node, and the nodes that left lately. */
export function nodeNotes(servers: readonly Server__Output[]): string[] {
  const lines: string[] = [];
  for (const s of servers) {
    const why = s.cordonReason ? `: ${s.cordonReason}` : '';
    if (s.draining)
      lines.push(
        `node ${s.id} ${s.busy > 0 ? `draining, ${s.busy} task${s.busy === 1 ? '' : 's'} left, stopped at ${utc(s.drainDeadlineMs)} if still running` : 'drained'}${why}`,
      );
    else if (s.cordoned) lines.push(`node ${s.id} cordoned${why}`);
    if (s.leftAtMs > 0) lines.push(`node ${s.id} left the cell at ${utc(s.leftAtMs)} (not registered now)`);
  }
  return lines;
}

export interface NodeFlags extends ClientFlags {
  reason?: string;
  json: boolean;
  deadline?: number;
  wait?: boolean;
}

/** What `tarcil node <action>` says of the server it got back. */
export function describeNode(action: 'cordon' | 'drain' | 'uncordon', s: Server__Output, deadlineMs?: number): string {
  const running = `${s.busy} task${s.busy === 1 ? '' : 's'}`;
  const gone = s.leftAtMs > 0 ? ` (not registered now: it left at ${utc(s.leftAtMs)})` : '';
  if (action === 'uncordon') return `node ${s.id} uncordoned: it takes new placements again${gone}`;
  if (action === 'cordon')
    return `node ${s.id} cordoned: no new placements; ${s.busy === 0 ? 'nothing runs there' : `its ${running} running go on`} (undo: tarcil node uncordon ${s.id})${gone}`;
  const deadline = deadlineMs !== undefined ? ` (deadline ${fmtMs(deadlineMs)})` : '';
  return s.busy === 0
    ? `node ${s.id} drained: no task runs there, and it takes no new placements (undo: tarcil node uncordon ${s.id})${gone}`
    : `node ${s.id} draining: no new placements; its ${running} finish, or at ${utc(s.drainDeadlineMs)}${deadline} are stopped and placed elsewhere (undo: tarcil node uncordon ${s.id})`;
}

export async function nodeCommand(action: 'cordon' | 'drain' | 'uncordon', id: string, o: NodeFlags, say: Out = out): Promise<void> {
  const c = client(o);
  try {
    const s = await unary<Server__Output>(o.timeout, (opts, cb) =>
      c.SetNodeScheduling(
        { server: id, action, reason: o.reason ?? '', ...(action === 'drain' ? { deadlineMs: o.deadline ?? DEFAULT_DRAIN_DEADLINE_MS } : {}) },
        opts,
        cb,
      ),
    );
    if (o.json) say(JSON.stringify(s, null, 2));
    else say(describeNode(action, s, action === 'drain' ? (o.deadline ?? DEFAULT_DRAIN_DEADLINE_MS) : undefined));
    if (action !== 'drain' || !o.wait || s.busy === 0) return;
    // --wait: until no task runs there (finished, or stopped at the deadline and placed elsewhere).
    let last = s.busy;
    for (;;) {
      await new Promise((r) => setTimeout(r, 500));
      const cl = await unary<Cluster__Output>(o.timeout, (opts, cb) => c.GetCluster({}, opts, cb));
      const now = cl.servers.find((x) => x.id === id);
      if (!now || now.state === 'down') return say(`node ${id} is down: it runs nothing`);
      if (!now.draining) return say(`node ${id} is no longer draining (uncordoned or cordoned meanwhile)`);
      if (now.busy === 0) return say(`node ${id} drained: no task runs there`);
      if (now.busy !== last && !o.json) say(`node ${id}: ${now.busy} task${now.busy === 1 ? '' : 's'} still running`);
      last = now.busy;
    }
  } finally {
    c.close();
  }
}

export interface LogsFlags extends ClientFlags {
  follow: boolean;
  /** host:port of a node's NodeMonitor: read there directly instead of through the front-end. */
  node?: string;
}

/** Parses the optional [task] argument. */
export function taskArg(v: string | undefined): number {
  if (v === undefined) return 0;
  if (!/^\d+$/.test(v) || Number(v) > 99_999) throw invalid('[task]', `must be a task index, an integer from 0 to 99999 (got '${v}')`);
  return Number(v);
}

/**
 * Streams a task's stdout to stdout and its stderr to stderr, through the front-end (which finds
 * the node its latest attempt ran on) or from `--node` directly.
 */
export async function logsCommand(
  job: string,
  task: number,
  o: LogsFlags,
  write: { stdout: (b: Buffer) => void; stderr: (b: Buffer) => void } = { stdout: (b) => process.stdout.write(b), stderr: (b) => process.stderr.write(b) },
): Promise<void> {
  const tls = clientTls(o);
  const direct = o.node !== undefined ? nodeMonitorClient(o.node, tls) : undefined;
  const front = direct ? undefined : schedulerClient(o.server, tls, o.token || undefined);
  try {
    const namespace = o.namespace ?? '';
    const qualified = resolveJobId(job, namespace) ?? job;
    const stream = direct
      ? direct.ReadTaskLog({ server: '', job: qualified, task, follow: o.follow })
      : front!.TaskLogs({ jobId: job, namespace, task, follow: o.follow });
    await new Promise<void>((resolve, reject) => {
      stream.on('data', (c: TaskLogChunk__Output) => (c.stream === 'stderr' ? write.stderr : write.stdout)(c.data));
      stream.on('end', () => resolve());
      stream.on('error', (err: grpc.ServiceError) => reject(errorFromStatus(err)));
      // Ctrl-C while following: stop the stream, not the process in the middle of a write.
      const stop = (): void => {
        stream.cancel();
        resolve();
      };
      process.once('SIGINT', stop);
      stream.on('close', () => process.removeListener('SIGINT', stop));
    });
  } finally {
    direct?.close();
    front?.close();
  }
}
