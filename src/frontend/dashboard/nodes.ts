/**
 * The dashboard's nodes view: every server of the cell with its RUs, the tasks on them (job,
 * task, since when), its state as `tarcil cluster --servers` shows it (up, cordoned, draining,
 * drained, blocked, down) and its load monitor's verdict (the slow tasks it reported, and whether
 * it took the server out of placements). Read on demand in one transaction of the store, as
 * GetCluster reads it: the RU records carry when each task was placed, which the agents' shared
 * view does not keep.
 */
import type { JobManager } from '../../owner/manager.ts';
import type { RuRecord } from '../../model/types.ts';
import type { Keys } from '../../state/keys.ts';
import { LiveKeys, type LiveServerRecord, type LoadReportRecord } from '../../state/live-records.ts';
import { parseJson, ruRecordsByServer } from '../../state/records.ts';
import type { ClusterStore } from '../../store/types.ts';
import { cordonsOf, departedServers } from '../node-service.ts';

export interface NodeTask {
  job: string;
  task: number;
  ru: number;
  /** busy, or reserved (a gang not confirmed yet). */
  state: string;
  /** When the RU was taken (ms since the epoch); absent in records written without it. */
  since?: number;
}

export interface NodeView {
  id: string;
  platform: string;
  rack: string;
  /** up, cordoned, draining, drained, blocked or down (as `tarcil cluster --servers` says). */
  state: string;
  rus: number;
  free: number;
  busy: number;
  down: number;
  /** One letter per RU, by index: f(ree), b(usy), r(eserved), d(own). */
  slots: string;
  tasks: NodeTask[];
  /** The load monitor's verdict in words: `ok`, or what it reported and whether it blocked the server. */
  load: string;
  /** The load monitor keeps new placements off this server. */
  blocked: boolean;
  /** Cordon or drain: who wrote it, why, and a drain's deadline. */
  cordon?: { mode: string; reason?: string; deadlineAt?: number; since: number };
  /** A server that left the cell lately: when. */
  leftAt?: number;
}

/** The verdict of a node's load monitor, from its flag and the reports of its slow tasks. */
export function loadVerdict(blocked: boolean, reports: readonly LoadReportRecord[]): string {
  const slow = [...reports].sort((a, b) => a.rate - b.rate);
  const list = slow
    .slice(0, 3)
    .map((r) => `task ${r.task} of ${r.job} at ${Math.round(r.rate * 100)}%`)
    .join(', ');
  const more = slow.length > 3 ? ` and ${slow.length - 3} more` : '';
  if (blocked) return slow.length > 0 ? `blocked: ${list}${more} of the expected rate` : 'blocked: a task ran well below its expected rate';
  return slow.length > 0 ? `slow: ${list}${more} of the expected rate` : 'ok';
}

/** Every server of the cell (registered, or departed lately), in natural order of their ids. */
export async function nodesView(store: ClusterStore, keys: Keys, manager: JobManager, now = Date.now()): Promise<NodeView[]> {
  const live = new LiveKeys(keys);
  const res = await store.txn({
    compare: [],
    success: [
      { type: 'get', key: keys.servers(), prefix: true },
      { type: 'get', key: keys.rus(), prefix: true },
      { type: 'get', key: keys.cordons(), prefix: true },
      { type: 'get', key: live.reports(), prefix: true },
    ],
  });
  const rus = ruRecordsByServer(keys, res.responses[1] ?? []);
  const cordons = cordonsOf(keys, res.responses[2] ?? []);
  const reports = new Map<string, LoadReportRecord[]>();
  for (const kv of res.responses[3] ?? []) {
    const r = parseJson<LoadReportRecord>(kv);
    if (!r) continue;
    const list = reports.get(r.server) ?? [];
    list.push(r);
    reports.set(r.server, list);
  }
  const registered = (res.responses[0] ?? []).map((kv) => parseJson<LiveServerRecord>(kv)).filter((s): s is LiveServerRecord => !!s);
  const out: NodeView[] = [];
  const add = (s: LiveServerRecord, leftAt?: number): void => {
    const m = leftAt === undefined ? (rus.get(s.id) ?? new Map<number, RuRecord>()) : new Map<number, RuRecord>();
    const tasks: NodeTask[] = [];
    let free = 0;
    let busy = 0;
    let down = 0;
    let slots = '';
    for (let i = 0; i < s.rus; i++) {
      const r = m.get(i);
      const st = s.state === 'down' ? 'down' : (r?.state ?? 'down');
      slots += st.charAt(0);
      if (st === 'free') free++;
      else if (st === 'busy' || st === 'reserved') {
        busy++;
        if (r?.job !== undefined) tasks.push({ job: r.job, task: r.task ?? 0, ru: i, state: st, ...(r.since !== undefined ? { since: r.since } : {}) });
      } else down++;
    }
    const cordon = cordons.get(s.id);
    const isDown = s.state === 'down' || leftAt !== undefined;
    const state = isDown ? 'down' : cordon?.mode === 'drain' ? (busy > 0 ? 'draining' : 'drained') : cordon ? 'cordoned' : s.blocked ? 'blocked' : 'up';
    out.push({
      id: s.id,
      platform: s.platform,
      rack: s.rack,
      state,
      rus: s.rus,
      free,
      busy,
      down,
      slots,
      tasks,
      load: isDown ? 'no verdict: the node is down' : loadVerdict(s.blocked === true, reports.get(s.id) ?? []),
      blocked: !isDown && s.blocked === true,
      ...(cordon
        ? {
            cordon: {
              mode: cordon.mode,
              since: cordon.since,
              ...(cordon.reason ? { reason: cordon.reason } : {}),
              ...(cordon.deadlineAt !== undefined ? { deadlineAt: cordon.deadlineAt } : {}),
            },
          }
        : {}),
      ...(leftAt !== undefined ? { leftAt } : {}),
    });
  };
  for (const s of registered) add(s);
  for (const d of departedServers(manager, new Set(registered.map((s) => s.id)), now)) add(d.rec, d.leftAt);
  return out.sort((a, b) => NUMERIC.compare(a.id, b.id));
}

const NUMERIC = new Intl.Collator(undefined, { numeric: true });
