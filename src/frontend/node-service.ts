/**
 * The Scheduler service's node operations: SetNodeScheduling (`tarcil node cordon|drain|uncordon`),
 * TaskLogs (`tarcil logs`, relayed from the node's NodeMonitor.ReadTaskLog), and the cordons and
 * departed servers that GetCluster and ExplainJob show.
 */
import { jobIdOf } from './job-id.ts';
import type * as grpc from '@grpc/grpc-js';
import type { JobManager } from '../owner/manager.ts';
import type { RuRecord } from '../model/types.ts';
import type { Keys } from '../state/keys.ts';
import type { CordonRecord, LiveJobRecord, LiveServerRecord, LiveTaskRecord } from '../state/live-records.ts';
import { readFromBlock } from '../state/task-chunks.ts';
import { parseJson } from '../state/records.ts';
import type { ClusterStore, KeyValue } from '../store/types.ts';
import type { Clock } from '../util/clock.ts';
import { invalid, quote, TarcilError } from '../util/errors.ts';
import type { Logger } from '../util/log.ts';
import { serverToProto } from './convert.ts';
import type { Server } from '../rpc/gen/tarcil/v1/Server.ts';
import type { SetNodeSchedulingRequest__Output } from '../rpc/gen/tarcil/v1/SetNodeSchedulingRequest.ts';
import type { TaskLogChunk } from '../rpc/gen/tarcil/v1/TaskLogChunk.ts';
import type { TaskLogChunk__Output } from '../rpc/gen/tarcil/v1/TaskLogChunk.ts';
import type { TaskLogsRequest__Output } from '../rpc/gen/tarcil/v1/TaskLogsRequest.ts';
import { endStreamWithError } from '../rpc/grpc.ts';
import { DEFAULT_SLOW_CONSUMER_MS, dropUnread } from '../rpc/connection-limits.ts';

import { DEFAULT_DRAIN_DEADLINE_MS, MAX_DRAIN_DEADLINE_MS } from './options.ts';

export { DEFAULT_DRAIN_DEADLINE_MS, MAX_DRAIN_DEADLINE_MS } from './options.ts';
export const NODE_ACTIONS = ['cordon', 'drain', 'uncordon'] as const;
const MAX_REASON = 256;
/** A server id as a key segment: no separator, no blank, not `.` or `..`. */
const SERVER_ID = /^(?!\.\.?$)[^\s/]{1,253}$/;
const GRPC_DEADLINE_EXCEEDED = 4;
const GRPC_UNAVAILABLE = 14;

export interface NodeServiceDeps {
  store: ClusterStore;
  keys: Keys;
  manager: JobManager;
  clock: Clock;
  log: Logger;
  /** Who writes a cordon (the front-end's process name). */
  process?: string;
  /** Reaches the monitors' NodeMonitor services (TaskLogs). */
  readLog?: (endpoint: string, req: { server: string; job: string; task: number; follow: boolean }) => grpc.ClientReadableStream<TaskLogChunk__Output>;
  /** NOT_FOUND for a job id (with the retention hint). */
  notFound: (job: string) => TarcilError;
  /** TaskLogs: a client that takes nothing for this long is dropped (default DEFAULT_SLOW_CONSUMER_MS). */
  slowConsumerMs?: number;
}

/**
 * Cordons, drains or uncordons a server: one put (or one delete) of `cordons/<id>`, after every
 * field is checked, so a refused request writes nothing. Answers the server as it is then.
 */
export async function setNodeScheduling(d: NodeServiceDeps, req: SetNodeSchedulingRequest__Output): Promise<Server> {
  const id = req.server;
  if (id === '') throw invalid('server', 'is required');
  if (!SERVER_ID.test(id)) throw invalid('server', 'must be a server id (1 to 253 characters, no / and no blank)');
  const action = req.action as (typeof NODE_ACTIONS)[number];
  if (!NODE_ACTIONS.includes(action)) throw invalid('action', `must be one of ${NODE_ACTIONS.join(', ')} (got "${quote(req.action)}")`);
  if (action !== 'drain' && req.deadlineMs !== undefined) throw invalid('deadline_ms', 'applies to drain only');
  if (req.reason.length > MAX_REASON) throw invalid('reason', `must be at most ${MAX_REASON} characters`);
  let deadlineMs: number | undefined;
  if (action === 'drain') {
    deadlineMs = req.deadlineMs ?? DEFAULT_DRAIN_DEADLINE_MS;
    if (!Number.isFinite(deadlineMs) || deadlineMs < 0 || deadlineMs > MAX_DRAIN_DEADLINE_MS)
      throw invalid('deadline_ms', 'must be a duration from 0 to 7 days, in milliseconds');
  }
  const k = d.keys;
  const res = await d.store.txn({
    compare: [],
    success: [
      { type: 'get', key: k.server(id) },
      { type: 'get', key: k.serverRus(id), prefix: true },
      { type: 'get', key: k.cordon(id) },
    ],
  });
  const rec = parseJson<LiveServerRecord>(res.responses[0]?.[0]);
  const was = parseJson<CordonRecord>(res.responses[2]?.[0]);
  const known = d.manager.cell.get(id);
  if (!rec && !was && !known) {
    throw new TarcilError(
      'NOT_FOUND',
      `server: no server '${quote(id)}' in the cell (registered now, or left within the last ${Math.round(d.manager.departedMemoryMs / 60_000)} min)`,
      { field: 'server' },
    );
  }
  const now = d.clock.now();
  let next: CordonRecord | undefined;
  if (action === 'uncordon') {
    if (was) await d.store.delete(k.cordon(id));
  } else {
    next = {
      server: id,
      mode: action,
      since: was?.mode === action ? was.since : now,
      ...(deadlineMs !== undefined ? { deadlineAt: now + deadlineMs } : {}),
      ...(req.reason !== '' ? { reason: req.reason } : {}),
      ...(d.process !== undefined ? { by: d.process } : {}),
    };
    await d.store.put(k.cordon(id), JSON.stringify(next));
  }
  await viewApplied(d, id, action !== 'uncordon');
  d.log.info(
    { node: id, action, deadline: next?.deadlineAt !== undefined ? new Date(next.deadlineAt).toISOString() : undefined, reason: req.reason || undefined },
    `node ${action}`,
  );
  const server: LiveServerRecord = rec ?? { ...(known?.spec ?? { id, platform: '', rack: '', rus: 0, speed: 1, attributes: {} }), state: 'down' };
  return serverToProto(server, rusOf(k, res.responses[1] ?? []), next, rec ? undefined : known?.leftAt);
}

/** How long SetNodeScheduling waits for its own agents to see the change before it answers. */
export const VIEW_APPLY_WAIT_MS = 2000;

/**
 * Waits (at most VIEW_APPLY_WAIT_MS) until this front-end's agents see the node cordoned (or no
 * longer): once the answer is given, they place nothing new on a node it cordoned. Other
 * front-ends follow through their own watch; a commit decided before still lands.
 */
async function viewApplied(d: NodeServiceDeps, id: string, cordoned: boolean): Promise<void> {
  if (!d.manager.started) return;
  const until = d.clock.now() + VIEW_APPLY_WAIT_MS;
  while (d.manager.view.state.cordoned().has(id) !== cordoned && d.clock.now() < until) await d.clock.sleep(5);
}

function rusOf(k: Keys, kvs: readonly KeyValue[]): Map<number, RuRecord> {
  const m = new Map<number, RuRecord>();
  for (const kv of kvs) {
    const ref = k.parseRu(kv.key);
    const r = parseJson<RuRecord>(kv);
    if (ref && r) m.set(ref.index, r);
  }
  return m;
}

/** Cordon records by server id. */
export function cordonsOf(k: Keys, kvs: readonly KeyValue[]): Map<string, CordonRecord> {
  const m = new Map<string, CordonRecord>();
  for (const kv of kvs) {
    const id = k.tail(k.cordons(), kv.key);
    const r = parseJson<CordonRecord>(kv);
    if (id !== undefined && r) m.set(id, r);
  }
  return m;
}

/**
 * Servers that left the cell lately (shut down, or their lease expired) and are not registered
 * again, as this front-end remembers them (`--departed-memory`): shown as down with when they left.
 */
export function departedServers(manager: JobManager, registered: ReadonlySet<string>, now: number): { rec: LiveServerRecord; leftAt: number }[] {
  const out: { rec: LiveServerRecord; leftAt: number }[] = [];
  for (const [id, c] of manager.cell) {
    if (registered.has(id) || c.leftAt === undefined || now - c.leftAt > manager.departedMemoryMs) continue;
    out.push({ rec: { ...c.spec, state: 'down' }, leftAt: c.leftAt });
  }
  return out.sort((a, b) => a.rec.id.localeCompare(b.rec.id));
}

function hhmmss(ms: number): string {
  return new Date(ms).toISOString().slice(11, 19);
}

/**
 * What `explain` adds about cordoned and draining servers for a job that is not final: which
 * servers take no placements, and which of the job's placements sit on a draining one.
 */
export function cordonLines(cordons: ReadonlyMap<string, CordonRecord>, placements: readonly { task: number; server: string }[]): string[] {
  if (cordons.size === 0) return [];
  const lines: string[] = [];
  const list = [...cordons.values()].sort((a, b) => a.server.localeCompare(b.server));
  const desc = (c: CordonRecord): string =>
    `${c.server} (${c.mode === 'drain' ? `draining${c.deadlineAt !== undefined ? `, deadline ${hhmmss(c.deadlineAt)} UTC` : ''}` : 'cordoned'}${c.reason ? `: ${c.reason}` : ''})`;
  lines.push(
    `nodes taking no new placements (tarcil node): ${list.slice(0, 20).map(desc).join(', ')}${list.length > 20 ? `, … ${list.length - 20} more` : ''}`,
  );
  const latest = new Map<number, string>();
  for (const p of placements) latest.set(p.task, p.server);
  for (const [task, server] of latest) {
    const c = cordons.get(server);
    if (c?.mode !== 'drain') continue;
    lines.push(
      `  task ${task} was placed on ${server}, which is draining: if it still runs at ${c.deadlineAt !== undefined ? `${hhmmss(c.deadlineAt)} UTC` : 'the deadline'}, it is stopped and placed elsewhere`,
    );
  }
  return lines;
}

/**
 * TaskLogs: finds where the task's latest attempt ran, and relays that node's
 * NodeMonitor.ReadTaskLog stream (with its flow control and cancellation).
 */
export function taskLogs(d: NodeServiceDeps, call: grpc.ServerWritableStream<TaskLogsRequest__Output, TaskLogChunk>): void {
  void (async () => {
    const id = jobIdOf(call.request);
    const task = call.request.task;
    const k = d.keys;
    const res = await d.store.txn({
      compare: [],
      success: [
        { type: 'get', key: k.job(id) },
        { type: 'get', key: k.task(id, task) },
      ],
    });
    const job = parseJson<LiveJobRecord>(res.responses[0]?.[0]);
    if (!job) throw d.notFound(id);
    if (task >= job.spec.tasks)
      throw invalid('task', `must be below ${job.spec.tasks} (job ${id} has ${job.spec.tasks} task${job.spec.tasks === 1 ? '' : 's'})`);
    let t = parseJson<LiveTaskRecord>(res.responses[1]?.[0]);
    if (!t) {
      // No record of its own: a task its placement started is in its block's chunk record (state/task-chunks.ts).
      t = await readFromBlock(d.store, k, id, task);
    }
    const server = t?.ru?.server ?? t?.server;
    if (!server) throw new TarcilError('FAILED_PRECONDITION', `task ${task} of job ${id} has not been placed yet: it has no log`);
    const node = parseJson<LiveServerRecord>(await d.store.get(k.server(server)));
    if (!node?.endpoint)
      throw new TarcilError(
        'UNAVAILABLE',
        `node ${server}, where task ${task} of job ${id} ran last, is not registered now (down or gone): its log stays on it`,
      );
    if (!d.readLog) throw new TarcilError('INTERNAL', 'this front-end cannot reach monitors');
    // The caller gave up while the records were read: open nothing on the node.
    if (call.cancelled) return;
    const up = d.readLog(node.endpoint, { server, job: id, task, follow: call.request.follow });
    // A client that takes nothing for slowConsumerMs loses the stream: the relay stops, and what
    // was queued for it is freed (rpc/connection-limits.ts, dropUnread).
    const slowMs = d.slowConsumerMs ?? DEFAULT_SLOW_CONSUMER_MS;
    let slow: NodeJS.Timeout | undefined;
    let dropped = false;
    const stopTimer = (): void => {
      clearTimeout(slow);
      slow = undefined;
    };
    call.on('cancelled', () => {
      stopTimer();
      up.cancel();
    });
    up.on('data', (c: TaskLogChunk__Output) => {
      if (call.write(c) || dropped) return;
      up.pause();
      slow ??= setTimeout(() => {
        slow = undefined;
        dropped = true;
        up.cancel();
        dropUnread(call, `the client took nothing of this log for ${slowMs} ms (slowConsumerMs); it was dropped`, true);
      }, slowMs).unref();
      call.once('drain', () => {
        stopTimer();
        if (!dropped) up.resume();
      });
    });
    up.on('end', () => {
      stopTimer();
      if (!dropped) call.end();
    });
    up.on('error', (e: grpc.ServiceError) => {
      stopTimer();
      if (dropped) return;
      // The node's own answer as it gave it; a node that cannot be reached is named with its address.
      const code = Number(e.code);
      const unreachable = code === GRPC_UNAVAILABLE || code === GRPC_DEADLINE_EXCEEDED;
      const details = unreachable ? `node ${server} at ${node.endpoint} cannot be reached: ${e.details}` : e.details;
      call.emit('error', Object.assign(new Error(details), { code: e.code, details }));
    });
  })().catch((e: unknown) => endStreamWithError(call, e));
}
