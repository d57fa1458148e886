/**
 * A job's one current reason, in plain words: why it waits now (the cell is full, its namespace's
 * quota, a constraint no server it may use meets now, cordoned servers, admission's hold), or what
 * it is doing (placing, running, done). `explain`, `status` and the dashboard print it first.
 *
 * `jobReason` is pure over the job record, its decision records, a summary of the cell as the
 * job sees it (`summarizeCell`: the RUs its constraints allow, who holds them) and its
 * namespace's quota; it reads nothing.
 */
import type { Constraints, JobSpec, ServerSpec } from '../model/types.ts';
import type { RuIndex } from '../sampling/ru-index.ts';
import { serverMatches } from '../sampling/feasibility.ts';
import type { DecisionRecord } from '../state/decisions.ts';
import { isFinalJob, type LiveJobRecord } from '../state/live-records.ts';

/** What a job's reason says of the cell: the servers and RUs its constraints allow, and who holds them. */
export interface CellSummary {
  /** Servers the cell knows (up, down, or left lately). */
  servers: number;
  /** Of those, the servers that meet the job's constraints, up or not. */
  matching: number;
  /** Of those, the servers up now (cordoned or not). */
  matchingUp: number;
  /** Matching servers up but cordoned or draining: their ids. */
  cordoned: string[];
  /** RUs of matching servers up and not cordoned (an RU marked down left out). */
  usable: number;
  /** Of those, RUs held by a task or reserved. */
  busy: number;
  /** The jobs holding the busy ones, most first. */
  holders: { job: string; rus: number }[];
}

export const REASON_KINDS = ['cell-full', 'quota', 'constraint', 'cordoned', 'admission', 'waiting', 'placing', 'running', 'done'] as const;
export type ReasonKind = (typeof REASON_KINDS)[number];

/** The reason, with the fields of the API's `Reason` message (their names as there). */
export interface JobReason {
  kind: ReasonKind;
  /** One plain sentence. */
  text: string;
  needed: number;
  rusUsable: number;
  rusBusy: number;
  holders: { job: string; rus: number }[];
  estimateMs?: number;
  boundMs?: number;
  namespace: string;
  quotaUsed: number;
  quotaLimit: number;
  constraint: string;
  serversMatching: number;
  buckets: number[];
  servers: string[];
  attempts: number;
  waitedMs: number;
}

/** The namespace's RU quota as the reason needs it (limit 0: none). */
export interface QuotaSummary {
  namespace: string;
  used: number;
  limit: number;
}

export interface ReasonInput {
  jobId: string;
  rec: LiveJobRecord;
  /** The job's decision records, oldest first (the stored ones, then the one in progress). */
  decisions: readonly DecisionRecord[];
  /** The cell as the job sees it; without it a waiting job's reason is what its record says. */
  cell?: CellSummary;
  quota?: QuotaSummary;
  now: number;
}

/** Holders named in the reason. */
export const TOP_HOLDERS = 5;
/** Cordoned servers named in the reason. */
const TOP_SERVERS = 10;

/**
 * The cell as a job with these constraints sees it, from an agent's view. `known`: every server
 * the front-end knows (registered now, or left lately, see agent/cell.ts); the view holds only
 * the registered ones. One pass over the servers.
 */
export function summarizeCell(state: RuIndex, constraints: Constraints, known?: Iterable<{ spec: ServerSpec }>): CellSummary {
  const out: CellSummary = { servers: 0, matching: 0, matchingUp: 0, cordoned: [], usable: 0, busy: 0, holders: [] };
  const byJob = new Map<string, number>();
  for (const s of state.servers.values()) {
    out.servers++;
    if (!serverMatches(s.spec, constraints)) continue;
    out.matching++;
    if (s.down) continue;
    out.matchingUp++;
    if (s.cordoned) {
      out.cordoned.push(s.id);
      continue;
    }
    for (let i = 0; i < s.ruCount; i++) {
      if (s.ruDown[i]) continue;
      out.usable++;
      const occ = s.occupants[i];
      if (!occ) continue;
      out.busy++;
      byJob.set(occ.job, (byJob.get(occ.job) ?? 0) + 1);
    }
  }
  if (known) {
    // Servers that left lately: not in the view, still part of the cell.
    let servers = 0;
    let matching = 0;
    for (const k of known) {
      servers++;
      if (serverMatches(k.spec, constraints)) matching++;
    }
    out.servers = Math.max(out.servers, servers);
    out.matching = Math.max(out.matching, matching);
  }
  out.cordoned.sort();
  out.holders = [...byJob].map(([job, rus]) => ({ job, rus })).sort((a, b) => b.rus - a.rus || a.job.localeCompare(b.job));
  return out;
}

/** The job's constraints in words ('' when it has none). */
export function describeConstraints(c: JobSpec['constraints']): string {
  const parts: string[] = [];
  if (c.platforms && c.platforms.length > 0) parts.push(`platform ${c.platforms.join(' or ')}`);
  for (const [k, v] of Object.entries(c.attributes ?? {})) parts.push(`${k}=${v}`);
  return parts.join(', ');
}

const plural = (n: number, one: string, many = `${one}s`): string => `${n} ${n === 1 ? one : many}`;

/** A wait in words: 850 ms, 12.5 s, 4.2 min, 1.5 h. */
export function fmtWait(ms: number): string {
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)} s`;
  if (ms < 3_600_000) return `${(ms / 60_000).toFixed(1)} min`;
  return `${(ms / 3_600_000).toFixed(1)} h`;
}

/** "held by jobs a (12), b (10) and 2 more": the holders named, most first. */
function holdersText(holders: readonly { job: string; rus: number }[], self: string): string {
  if (holders.length === 0) return '';
  const named = holders.slice(0, TOP_HOLDERS).map((h) => `${h.job === self ? 'this job' : h.job} (${h.rus})`);
  const rest = holders.length - named.length;
  return `, held by ${holders.length === 1 ? 'job' : 'jobs'} ${named.join(', ')}${rest > 0 ? ` and ${plural(rest, 'more job')}` : ''}`;
}

function empty(kind: ReasonKind, text: string): JobReason {
  return {
    kind,
    text,
    needed: 0,
    rusUsable: 0,
    rusBusy: 0,
    holders: [],
    namespace: '',
    quotaUsed: 0,
    quotaLimit: 0,
    constraint: '',
    serversMatching: 0,
    buckets: [],
    servers: [],
    attempts: 0,
    waitedMs: 0,
  };
}

/** The job's one current reason (see the module's comment). */
export function jobReason(input: ReasonInput): JobReason {
  const { rec, jobId } = input;
  const n = rec.spec.tasks;
  const counts = rec.taskStates ?? {};
  if (isFinalJob(rec.state)) {
    const done = (counts.succeeded ?? 0) + (counts.failed ?? 0) + (counts.cancelled ?? 0);
    if (rec.state === 'succeeded') return empty('done', `done: succeeded, all ${plural(n, 'task')} ended well`);
    if (rec.state === 'cancelled')
      return empty('done', `done: cancelled${done > 0 && (counts.succeeded ?? 0) > 0 ? ` (${counts.succeeded ?? 0} of ${n} tasks had succeeded)` : ''}`);
    return empty('done', `done: failed${rec.message ? ` — ${rec.message}` : ''}`);
  }
  if (rec.cancelRequested) return empty('done', 'cancelling: its running tasks are being stopped');
  const unplaced = Math.max(0, n - (rec.placed ?? 0));
  if (unplaced === 0) {
    const running = counts.running ?? 0;
    const ended = (counts.succeeded ?? 0) + (counts.failed ?? 0) + (counts.cancelled ?? 0);
    if (running > 0 || ended > 0) return empty('running', `running: ${running} of ${plural(n, 'task')} running${ended > 0 ? `, ${ended} ended` : ''}`);
    return empty('placing', `placed: all ${plural(n, 'task')} placed, starting on their nodes`);
  }
  return waitingReason(input, unplaced, jobId);
}

function waitingReason(input: ReasonInput, unplaced: number, self: string): JobReason {
  const w = waitOf(input, unplaced);
  const { r } = w;
  const cell = input.cell;
  if (!cell) {
    r.text = `waiting${w.says ? `: ${w.says}` : ' to be placed'}`;
    return r;
  }
  r.rusUsable = cell.usable;
  r.rusBusy = cell.busy;
  r.holders = cell.holders.slice(0, TOP_HOLDERS);
  r.serversMatching = cell.matching;
  return blockedReason(input, w, cell) ?? freeReason(input, w, cell, self);
}

/** What every waiting reason says: how many RUs it needs at once, how long it waited and may wait, what the scheduling call says. */
interface Wait {
  r: JobReason;
  unplaced: number;
  needed: number;
  gang: boolean;
  need: string;
  wait: string;
  says: string;
  live: DecisionRecord | undefined;
  verdict: DecisionRecord['admission'][number] | undefined;
}

function waitOf(input: ReasonInput, unplaced: number): Wait {
  const { rec, decisions, now } = input;
  const spec = rec.spec;
  const gang = spec.mode === 'gang';
  const n = spec.tasks;
  // A gang goes on with all its tasks at once; an incremental job with one free RU.
  const needed = gang ? unplaced : 1;
  const latest = decisions[decisions.length - 1];
  const live = latest && latest.finishedAt === undefined ? latest : undefined;
  const verdicts = decisions.flatMap((d) => d.admission);
  const verdict = verdicts[verdicts.length - 1];
  const r = empty('waiting', '');
  r.needed = needed;
  r.waitedMs = Math.max(0, now - rec.submittedAt);
  r.attempts = live?.samples.length ?? 0;
  if (verdict?.estimateMs !== undefined && Number.isFinite(verdict.estimateMs)) r.estimateMs = verdict.estimateMs;
  if (verdict?.boundMs !== undefined && Number.isFinite(verdict.boundMs)) r.boundMs = verdict.boundMs;
  const placedPart = unplaced < n ? `${n - unplaced} of its ${n} tasks placed, ` : '';
  const need = gang ? `it needs ${unplaced} at once` : `${placedPart}${plural(unplaced, 'task')} ${unplaced === 1 ? 'waits' : 'wait'} for one`;
  const bound = r.boundMs !== undefined ? ` (bound ${fmtWait(r.boundMs)})` : '';
  // An estimate the job has already waited past is no estimate of what is left: said as passed.
  const passed = r.estimateMs !== undefined && r.waitedMs > Math.max(r.estimateMs, r.boundMs ?? 0);
  const wait =
    r.estimateMs === undefined
      ? ''
      : passed
        ? `; waited ${fmtWait(r.waitedMs)}, past admission's estimate of ${fmtWait(r.estimateMs)}${bound}`
        : `; estimated wait ${fmtWait(r.estimateMs)}${bound}`;
  return { r, unplaced, needed, gang, need, wait, says: live?.waiting ?? rec.message ?? '', live, verdict };
}

/** A wait that free RUs alone will not end: no server it may use, all cordoned, a gang larger than what is up, the namespace's quota. */
function blockedReason(input: ReasonInput, w: Wait, cell: CellSummary): JobReason | undefined {
  const { r, needed, gang, unplaced } = w;
  const { spec } = input.rec;
  const n = spec.tasks;
  const quota = input.quota;
  const constraint = describeConstraints(spec.constraints);
  if (cell.matchingUp === 0) {
    r.kind = 'constraint';
    r.constraint = constraint || 'any server';
    r.text =
      cell.matching === 0
        ? `no server meets its constraints: ${constraint || 'any server'} is met by none of the ${plural(cell.servers, 'server')} of the cell`
        : `no server it may use is up: ${constraint || 'any server'} is met by ${plural(cell.matching, 'server')}, all down`;
    return r;
  }
  if (cell.usable === 0 && cell.cordoned.length > 0) {
    r.kind = 'cordoned';
    r.constraint = constraint;
    r.servers = cell.cordoned.slice(0, TOP_SERVERS);
    const more = cell.cordoned.length - r.servers.length;
    r.text = `every server it may use is cordoned or draining: ${r.servers.join(', ')}${more > 0 ? ` and ${more} more` : ''} (tarcil node uncordon <server> lets one take tasks again)`;
    return r;
  }
  if (gang && needed > cell.usable) {
    r.kind = 'constraint';
    r.constraint = constraint ? `${constraint}; a gang of ${n}` : `a gang of ${n}`;
    const down = cell.matching - cell.matchingUp;
    const off = [cell.cordoned.length > 0 ? `${plural(cell.cordoned.length, 'server')} cordoned` : '', down > 0 ? `${plural(down, 'server')} down` : '']
      .filter(Boolean)
      .join(', ');
    r.text = `a gang of ${n} needs ${needed} RUs at once and only ${cell.usable} it may use ${cell.usable === 1 ? 'is' : 'are'} up${off ? ` (${off})` : ''}`;
    return r;
  }
  if (quota && quota.limit > 0 && quota.used + needed > quota.limit) {
    r.kind = 'quota';
    r.namespace = quota.namespace;
    r.quotaUsed = quota.used;
    r.quotaLimit = quota.limit;
    r.text = `namespace ${quota.namespace} is at its quota: ${quota.used} of ${quota.limit} RUs in use; ${gang ? `it needs ${needed} more at once` : `${plural(unplaced, 'task')} ${unplaced === 1 ? 'waits' : 'wait'} for an RU of the quota`}`;
    return r;
  }
  return undefined;
}

/** A wait for free RUs: the cell full, admission control holding it, its first call to come, or RUs free and the call under way. */
function freeReason(input: ReasonInput, w: Wait, cell: CellSummary, self: string): JobReason {
  const { r, needed, need, wait, says, live, verdict } = w;
  const { rec, decisions } = input;
  const spec = rec.spec;
  const free = cell.usable - cell.busy;
  if (free < needed) {
    r.kind = 'cell-full';
    const head = free === 0 ? 'the cell is full' : 'the cell has too few free RUs';
    r.text = `${head}: ${cell.busy} of ${cell.usable} RUs it may use are busy${holdersText(cell.holders, self)}; ${need}${free > 0 ? ` and ${free} ${free === 1 ? 'is' : 'are'} free` : ''}${wait}`;
    return r;
  }
  if (live?.waiting?.startsWith('queued by admission') === true || (verdict?.action === 'queue' && rec.state === 'queued')) {
    r.kind = 'admission';
    r.buckets = verdict ? [...verdict.buckets] : [];
    const acc = verdict
      ? `${verdict.acceptableFree} of ${verdict.totalFree} free RUs would run it well (buckets ${verdict.buckets.length > 0 ? verdict.buckets.join(', ') : 'none'}), it needs ${verdict.needed}`
      : 'too few free RUs would run it well';
    r.text = `admission control holds it: ${acc}${wait}; it waits at most ${fmtWait(spec.maxQueueMs)}`;
    return r;
  }
  if (decisions.length === 0) {
    r.text = `waiting for its first scheduling call: ${free} of ${cell.usable} RUs it may use are free`;
    return r;
  }
  r.text = `waiting: ${free} of ${cell.usable} RUs it may use are free${says ? `, ${says}` : ''}${r.attempts > 0 ? ` (${plural(r.attempts, 'sample attempt')} so far)` : ''}`;
  return r;
}
