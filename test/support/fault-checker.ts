/**
 * The checker of a fault-injection run. It reads the whole etcd history of the run's prefix (from
 * revision 1), the store at the end, the execution records the tasks wrote themselves (which do
 * not depend on etcd) and what the clients were told, and reports every violation of:
 *   - every acknowledged job final exactly once (and succeeded, unless it was cancelled);
 *   - every submission a client kept trying taken once the faults before it were repaired;
 *   - no RU held by two tasks, nor a task by two RUs, at any revision; no two processes on one RU;
 *   - no two overlapping runs of a task (in the records, and in etcd's `running` records);
 *   - no task that succeeded runs again (a start after a run that ended with exit 0);
 *   - every second run explained by a `lost` outcome recorded for the run before it;
 *   - every `succeeded` outcome backed by a run that completed; no run etcd never recorded;
 *   - every line of the execution records a whole record (a run is never given a time of 0);
 *   - nothing leaked at the end: RUs busy or reserved, owner, queue, request, decision or report
 *     keys of finished or missing jobs, tasks still active, servers missing, processes running.
 * It also measures, per fault, the scheduling stall (from the fault, or from the end of a quorum
 * loss, to the first task started by a decision made after it) and the tasks run again.
 */
import { placedRevisionOf, type LiveJobRecord, type LiveTaskRecord, type RequestRecord } from '../../src/state/live-records.ts';
import { parseJson, type PlacedRuRecord } from '../../src/state/records.ts';
import { chunkTaskRecords, isChunkKey } from '../../src/state/task-chunks.ts';
import { doneTaskRecords, isDoneKey } from '../../src/state/task-outcomes.ts';
import type { KeyValue, WatchEvent } from '../../src/store/types.ts';
import type { FaultKind, FaultRecord } from './nemesis.ts';

/** One run of a task process, from the execution records. */
export interface ExecRun {
  id: string;
  job: string;
  task: number;
  node: string;
  ru: number;
  /** RU record revision of the placement (from the task's log file name). */
  rev: number;
  pid: number;
  start: number;
  /** When it ended; undefined while it is still running. */
  end?: number;
  /** exit0: wrote its end line; signalled: wrote K; vanished: gone without a line; open: running. */
  how: 'exit0' | 'signalled' | 'vanished' | 'open';
}

export const VIOLATIONS = [
  'job-stuck',
  'job-final-count',
  'job-state',
  'job-duplicated',
  'submit-refused',
  'submission-lost',
  'ru-double-booked',
  'task-held-twice',
  'ru-shared',
  'runs-overlap',
  'recorded-runs-overlap',
  'succeeded-task-ran-again',
  'rerun-unexplained',
  'run-unrecorded',
  'success-without-run',
  'record-malformed',
  'ru-leaked',
  'ru-stray',
  'owner-leaked',
  'queue-leaked',
  'request-orphaned',
  'decision-orphaned',
  'report-leaked',
  'task-active-at-end',
  'server-missing',
  'process-leaked',
] as const;
export type ViolationKind = (typeof VIOLATIONS)[number];

export interface Violation {
  kind: ViolationKind;
  detail: string;
}

/** What a client was told about one submission (see test/fault/workload.ts). */
export interface SubmissionOutcome {
  name: string;
  jobId?: string;
  refused?: string;
  cancelAskedAt?: number;
  submittedAt?: number;
  /** When its client gave up, not acknowledged, and the deadline it was given. */
  gaveUpAt?: number;
  deadlineAt?: number;
}

/** How long after the last repair a cell must take a submission that a client keeps trying. */
export const SUBMIT_SETTLE_MS = 5000;
const TRANSIENT = ['UNAVAILABLE', 'DEADLINE_EXCEEDED', 'CANCELLED', 'INTERNAL', 'UNKNOWN'];

/** The store at the end of the run, one collection per field. */
export interface FinalState {
  jobs: KeyValue[];
  tasks: KeyValue[];
  owners: KeyValue[];
  queue: KeyValue[];
  rus: KeyValue[];
  servers: KeyValue[];
  requests: KeyValue[];
  decisions: KeyValue[];
  reports: KeyValue[];
}

export interface CheckInput {
  prefix: string;
  /** Every event under the prefix from revision 1, in revision order. */
  events: readonly WatchEvent[];
  final: FinalState;
  runs: readonly ExecRun[];
  /** Lines of the execution-record file that are not whole records (parseRecords). */
  malformed?: readonly string[];
  submissions: readonly SubmissionOutcome[];
  /** Server ids that must be registered at the end. */
  servers: readonly string[];
  faults: readonly FaultRecord[];
  /** When the workload ran (Date.now() values), for the fault-free baseline of the stall. */
  window: { start: number; end: number };
}

export interface FaultMeasure {
  kind: FaultKind;
  target: string;
  start: number;
  healed: number;
  electionMs?: number;
  /** From the fault (quorum loss: its end) to the first task started by a decision made after it. */
  stallMs?: number;
  /** Runs that repeat a task, started between this fault and the next one. */
  reruns: number;
  rerunsAfterSuccess: number;
  error?: string;
}

export interface CheckReport {
  violations: Violation[];
  counts: Partial<Record<ViolationKind, number>>;
  faults: FaultMeasure[];
  /** The same stall measured at fault-free instants: what "no stall" looks like in this run. */
  baseline: { n: number; p50?: number; p90?: number };
  totals: {
    submitted: number;
    acked: number;
    cancelAsked: number;
    jobsStored: number;
    tasks: number;
    runs: number;
    reruns: number;
    rerunsAfterSuccess: number;
    runsSignalled: number;
    runsVanished: number;
    revisions: number;
  };
}

const FINAL = new Set(['succeeded', 'failed', 'cancelled']);
const ACTIVE_TASK = new Set(['queued', 'placed', 'running', 'lost']);

/** The execution records of a run: the runs, and every line that is not a whole record (with why). */
export interface ParsedRecords {
  runs: ExecRun[];
  malformed: string[];
}

const INT = /^\d+$/;

/**
 * Parses the execution-record file; `gone` says when the watcher saw a run's process disappear.
 * A line with an empty or non-numeric field (a time a killed `date` left empty, a torn write) is
 * not a record: it is kept out of the runs and listed in `malformed`, so that a run never gets a
 * start or end of 0 (1970), which would make it span every other run on its RU.
 */
export function parseRecords(text: string, gone: ReadonlyMap<string, number>): ParsedRecords {
  const runs = new Map<string, ExecRun>();
  const malformed: string[] = [];
  text.split('\n').forEach((line, i) => {
    if (line.trim() === '') return;
    const f = line.split(' ');
    const [kind, job, task, node, ru, rev, pid, id, ms] = f as [string, string, string, string, string, string, string, string, string];
    const bad =
      f.length !== 9
        ? `${f.length} fields, not 9`
        : !['S', 'E', 'K'].includes(kind)
          ? `kind '${kind}' is not S, E or K`
          : (
              [
                ['task', task],
                ['ru', ru],
                ['rev', rev],
                ['pid', pid],
                ['time', ms],
              ] as const
            ).find(([, x]) => !INT.test(x));
    if (bad !== undefined || !job || !node || !id) {
      const why = bad === undefined ? 'an empty job, node or run id' : typeof bad === 'string' ? bad : `${bad[0]} '${bad[1]}' is not a whole number`;
      malformed.push(`line ${i + 1}: ${why}: ${JSON.stringify(line.slice(0, 200))}`);
      return;
    }
    if (kind === 'S') {
      runs.set(id, { id, job, task: Number(task), node, ru: Number(ru), rev: Number(rev), pid: Number(pid), start: Number(ms), how: 'open' });
    } else {
      const r = runs.get(id);
      if (!r) return;
      r.end = Number(ms);
      r.how = kind === 'E' ? 'exit0' : 'signalled';
    }
  });
  for (const r of runs.values()) {
    const at = gone.get(r.id);
    if (r.how === 'open' && at !== undefined) {
      r.end = at;
      r.how = 'vanished';
    }
  }
  return { runs: [...runs.values()].sort((a, b) => a.start - b.start), malformed };
}

/** The runs of the execution-record file (see parseRecords; malformed lines are left out). */
export function readRuns(text: string, gone: ReadonlyMap<string, number>): ExecRun[] {
  return parseRecords(text, gone).runs;
}

const tid = (job: string, task: number): string => `${job}#${task}`;
/** Time of day (UTC) with milliseconds, for violation details. */
export const hms = (ms: number | undefined): string => (ms === undefined || !Number.isFinite(ms) ? 'the end' : new Date(ms).toISOString().slice(11, 23));

function pctl(xs: number[], q: number): number | undefined {
  if (xs.length === 0) return undefined;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(q * s.length))];
}

export function check(input: CheckInput): CheckReport {
  const p = input.prefix;
  const out: Violation[] = [];
  const v = (kind: ViolationKind, detail: string): void => void out.push({ kind, detail });
  const tail = (coll: string, key: string): string => key.slice(`${p}${coll}/`.length);
  const under =
    (coll: string) =>
    (ev: WatchEvent): boolean =>
      ev.kv.key.startsWith(`${p}${coll}/`);

  // --- Jobs: final exactly once, the expected state, one stored job per submission.
  const finals = new Map<string, number>();
  for (const ev of input.events.filter(under('jobs'))) {
    const rec = ev.type === 'put' ? parseJson<LiveJobRecord>(ev.kv) : undefined;
    if (rec && FINAL.has(rec.state)) finals.set(tail('jobs', ev.kv.key), (finals.get(tail('jobs', ev.kv.key)) ?? 0) + 1);
  }
  const jobs = new Map(input.final.jobs.map((kv) => [tail('jobs', kv.key), parseJson<LiveJobRecord>(kv) as LiveJobRecord]));
  for (const [id, j] of jobs) {
    if (!FINAL.has(j.state)) v('job-stuck', `${id} (${j.spec.name}) is ${j.state}: ${j.message ?? ''}`);
    else if (finals.get(id) !== 1) v('job-final-count', `${id} reached a final state ${finals.get(id) ?? 0} times`);
  }
  const byName = new Map<string, string[]>();
  for (const [id, j] of jobs) byName.set(j.spec.name, [...(byName.get(j.spec.name) ?? []), id]);
  for (const [name, ids] of byName) if (ids.length > 1) v('job-duplicated', `${name} stored as ${ids.join(', ')}`);
  for (const s of input.submissions) {
    if (s.jobId === undefined) {
      if (s.refused && !TRANSIENT.includes(s.refused)) v('submit-refused', `${s.name}: ${s.refused}`);
      else if (s.gaveUpAt !== undefined) {
        // Its client kept trying: past the faults before it (a quorum loss: until etcd had a leader
        // again; a front-end started again: until it listened), the cell must have taken it.
        const repaired = Math.max(
          s.submittedAt ?? 0,
          ...input.faults.filter((f) => f.start < (s.gaveUpAt as number)).map((f) => f.healed + (f.kind === 'quorum-loss' ? (f.electionMs ?? 0) : 0)),
        );
        if (s.gaveUpAt - repaired >= SUBMIT_SETTLE_MS)
          v(
            'submission-lost',
            `${s.name}: not acknowledged (${s.refused ?? 'no answer'}); its client tried until ${hms(s.gaveUpAt)}, ${s.gaveUpAt - repaired} ms after the cell was repaired`,
          );
        // The retrying client tries until the deadline it is given, not for a count of tries.
        else if (s.deadlineAt !== undefined && s.gaveUpAt < s.deadlineAt - 1000)
          v(
            'submission-lost',
            `${s.name}: not acknowledged (${s.refused ?? 'no answer'}); its client gave up at ${hms(s.gaveUpAt)}, before its deadline ${hms(s.deadlineAt)}`,
          );
      }
      continue;
    }
    const j = jobs.get(s.jobId);
    const ok = s.cancelAskedAt !== undefined ? ['cancelled', 'succeeded'] : ['succeeded'];
    if (!j) v('job-state', `${s.name}: acknowledged as ${s.jobId}, which is not in the store`);
    else if (FINAL.has(j.state) && !ok.includes(j.state)) v('job-state', `${s.name} (${s.jobId}) ended ${j.state}: ${j.message ?? ''}`);
  }

  // --- RUs, revision by revision: one task per RU, one RU per task.
  const holder = new Map<string, string>();
  const heldBy = new Map<string, Set<string>>();
  const ruEvents = input.events.filter(under('rus'));
  for (let i = 0; i < ruEvents.length;) {
    const rev = ruEvents[i]?.kv.modRevision;
    const touched = new Set<string>();
    for (; i < ruEvents.length && ruEvents[i]?.kv.modRevision === rev; i++) {
      const ev = ruEvents[i] as WatchEvent;
      const rec = ev.type === 'put' ? parseJson<PlacedRuRecord>(ev.kv) : undefined;
      const prev = holder.get(ev.kv.key);
      const now = rec && (rec.state === 'busy' || rec.state === 'reserved') ? tid(rec.job, rec.task) : undefined;
      if (prev !== undefined && now !== undefined && prev !== now)
        v('ru-double-booked', `${tail('rus', ev.kv.key)} given to ${now} at revision ${rev} while it held ${prev}`);
      if (prev !== undefined) heldBy.get(prev)?.delete(ev.kv.key);
      holder.delete(ev.kv.key);
      if (now !== undefined) {
        holder.set(ev.kv.key, now);
        let set = heldBy.get(now);
        if (!set) heldBy.set(now, (set = new Set()));
        set.add(ev.kv.key);
        touched.add(now);
      }
    }
    for (const t of touched) {
      const set = heldBy.get(t);
      if (set && set.size > 1) v('task-held-twice', `${t} holds ${[...set].map((k) => tail('rus', k)).join(' and ')} at revision ${rev}`);
    }
  }

  // --- Task records: running placements, outcomes per placement, recorded overlaps. One commit
  // places several tasks at one revision, so a placement is a task with its RU revision (runs,
  // `running` records) or with its commit id (outcomes, which a restarted monitor writes without
  // the revision).
  const running = new Map<string, { commit: string; placedAt: number; rev: number }>();
  const outcomes = new Map<string, { state: string; rev: number }[]>();
  /** The placement (commit) each task is recorded running for; a re-recorded running record of the same commit (a monitor adopting its task under a new lease) is the same run. */
  const current = new Map<string, string>();
  // A chunk record (src/state/task-chunks.ts) is the `running` record of every task it started.
  // An outcome record (src/state/task-outcomes.ts) holds the successes and cancellations its owner recorded.
  const recordsIn = (kv: KeyValue): LiveTaskRecord[] => {
    if (!isChunkKey(kv.key) && !isDoneKey(kv.key)) return [parseJson<LiveTaskRecord>(kv)].filter((t): t is LiveTaskRecord => !!t);
    const rest = tail('tasks', kv.key);
    const job = rest.slice(0, rest.lastIndexOf('/'));
    return isDoneKey(kv.key) ? doneTaskRecords(job, kv) : chunkTaskRecords(job, kv);
  };
  for (const ev of input.events.filter(under('tasks')))
    for (const t of ev.type === 'put' ? recordsIn(ev.kv) : []) {
      const id = tid(t.job, t.index);
      const placedRev = placedRevisionOf(t, ev.kv.modRevision);
      if (t.state === 'running' && placedRev !== undefined) {
        const cur = current.get(id);
        const commit = t.commitId ?? `@${placedRev}`;
        if (cur !== undefined && cur !== commit)
          v('recorded-runs-overlap', `${id} recorded running for commit ${commit} at revision ${ev.kv.modRevision} while commit ${cur} had not ended`);
        current.set(id, commit);
        running.set(`${id}@${placedRev}`, { commit: `${id}@${t.commitId ?? ''}`, placedAt: t.placedAt ?? 0, rev: ev.kv.modRevision });
      } else if (t.state !== 'placed') {
        current.delete(id);
        const commit = `${id}@${t.commitId ?? ''}`;
        outcomes.set(commit, [...(outcomes.get(commit) ?? []), { state: t.state, rev: ev.kv.modRevision }]);
      }
    }

  // --- Execution records against etcd. Each grouping below walks runs in start order.
  for (const m of input.malformed ?? []) v('record-malformed', m);
  const runs = [...input.runs].sort((a, b) => a.start - b.start);
  const placementOf = (r: ExecRun): { commit: string; placedAt: number; rev: number } | undefined => running.get(`${tid(r.job, r.task)}@${r.rev}`);
  const commitOf = new Map<string, string>();
  for (const r of runs) {
    const pl = placementOf(r);
    if (!pl) v('run-unrecorded', `${tid(r.job, r.task)} ran on ${r.node}/${r.ru} (RU revision ${r.rev}) with no running record for that placement`);
    else commitOf.set(r.id, pl.commit);
  }
  const byTask = new Map<string, ExecRun[]>();
  const byRu = new Map<string, ExecRun[]>();
  for (const r of runs) {
    byTask.set(tid(r.job, r.task), [...(byTask.get(tid(r.job, r.task)) ?? []), r]);
    byRu.set(`${r.node}/${r.ru}`, [...(byRu.get(`${r.node}/${r.ru}`) ?? []), r]);
  }
  const end = (r: ExecRun): number => r.end ?? Infinity;
  for (const [ru, list] of byRu) {
    let last: ExecRun | undefined;
    for (const r of list) {
      if (last && r.start < end(last))
        v('ru-shared', `${ru}: ${tid(r.job, r.task)} started at ${hms(r.start)} while ${tid(last.job, last.task)} ran until ${hms(end(last))}`);
      if (!last || end(r) > end(last)) last = r;
    }
  }
  /** Each run that repeats a task, with the time the run before it ended (or started, if it never ended). */
  const reruns: { run: ExecRun; after: number }[] = [];
  const rerunAfterSuccess = new Set<string>();
  for (const [id, list] of byTask) {
    let last: ExecRun | undefined;
    for (let i = 0; i < list.length; i++) {
      const r = list[i] as ExecRun;
      if (i === 0) {
        last = r;
        continue;
      }
      const prev = list[i - 1] as ExecRun;
      reruns.push({ run: r, after: prev.end ?? prev.start });
      if (last && r.start < end(last))
        v('runs-overlap', `${id}: run on ${r.node} started at ${hms(r.start)} while the run on ${last.node} (${last.how}) lasted until ${hms(end(last))}`);
      const done = list.slice(0, i).find((x) => x.how === 'exit0');
      if (done) {
        rerunAfterSuccess.add(r.id);
        v('succeeded-task-ran-again', `${id}: ran on ${r.node} at ${hms(r.start)} after a run on ${done.node} ended with exit 0 at ${hms(done.end)}`);
      }
      const prevCommit = commitOf.get(prev.id);
      const mine = placementOf(r);
      const lost = prevCommit !== undefined ? (outcomes.get(prevCommit) ?? []).find((o) => o.state === 'lost') : undefined;
      if (!lost || !mine || lost.rev > mine.rev || commitOf.get(r.id) === prevCommit) {
        v(
          'rerun-unexplained',
          `${id}: run on ${r.node} at ${hms(r.start)} follows a run on ${prev.node} (${prev.how}) whose placement has no lost outcome recorded before it`,
        );
      }
      if (!last || end(r) > end(last)) last = r;
    }
  }

  // --- Outcomes backed by runs; leaks at the end.
  const completed = new Set(runs.filter((r) => r.how === 'exit0').map((r) => commitOf.get(r.id)));
  // Each task's own record, or its chunk's while it has none.
  const latest = new Map<string, { t: LiveTaskRecord; rev: number }>();
  for (const kv of input.final.tasks) {
    for (const t of recordsIn(kv)) {
      const id = tid(t.job, t.index);
      if ((latest.get(id)?.rev ?? -1) < kv.modRevision) latest.set(id, { t, rev: kv.modRevision });
    }
  }
  const finalTasks = [...latest.values()].map((e) => e.t);
  for (const t of finalTasks) {
    if (t.state === 'succeeded' && !completed.has(`${tid(t.job, t.index)}@${t.commitId ?? ''}`))
      v('success-without-run', `${tid(t.job, t.index)} recorded succeeded (commit ${t.commitId ?? '?'}) with no completed run of that placement`);
    if (ACTIVE_TASK.has(t.state) && FINAL.has(jobs.get(t.job)?.state ?? ''))
      v('task-active-at-end', `${tid(t.job, t.index)} is ${t.state} in a ${jobs.get(t.job)?.state} job`);
  }
  const live = new Set(input.final.servers.map((kv) => tail('servers', kv.key)));
  for (const s of input.servers) if (!live.has(s)) v('server-missing', `${s} is not registered at the end`);
  for (const kv of input.final.rus) {
    const r = parseJson<{ state: string }>(kv);
    const server = tail('rus', kv.key).split('/')[0] ?? '';
    if (r && r.state !== 'free') v('ru-leaked', `${tail('rus', kv.key)} is ${kv.value.slice(0, 100)}`);
    if (!live.has(server)) v('ru-stray', `${tail('rus', kv.key)} belongs to ${server}, which is not registered`);
  }
  for (const kv of input.final.owners)
    if (FINAL.has(jobs.get(tail('owners', kv.key))?.state ?? '')) v('owner-leaked', `owner key of finished job ${tail('owners', kv.key)}`);
  for (const kv of input.final.queue) v('queue-leaked', `queue entry ${tail('queue', kv.key)} is still there`);
  for (const kv of input.final.requests) {
    const r = parseJson<RequestRecord>(kv);
    if (!r || !jobs.has(r.job)) v('request-orphaned', `request ${tail('requests', kv.key)} names job ${r?.job ?? '?'}, which is not stored`);
  }
  for (const kv of input.final.decisions)
    if (!jobs.has(tail('decisions', kv.key))) v('decision-orphaned', `decision record of missing job ${tail('decisions', kv.key)}`);
  for (const kv of input.final.reports) v('report-leaked', `load report ${tail('reports', kv.key)} is still there`);
  for (const r of runs) if (r.how === 'open') v('process-leaked', `${tid(r.job, r.task)} (pid ${r.pid} on ${r.node}) still runs at the end`);

  // --- Measures: stall per fault, against fault-free instants; re-runs per fault.
  const placedRuns = runs.flatMap((r) => {
    const pl = placementOf(r);
    return pl ? [{ placedAt: pl.placedAt, start: r.start }] : [];
  });
  const stallFrom = (t: number): number | undefined => {
    let best = Infinity;
    for (const x of placedRuns) if (x.placedAt >= t && x.start < best) best = x.start;
    return Number.isFinite(best) ? best - t : undefined;
  };
  const faults = [...input.faults].sort((a, b) => a.start - b.start);
  // A re-run is put down to the last fault that began before the run it repeats ended.
  const measures: FaultMeasure[] = faults.map((f, i) => {
    const next = faults[i + 1]?.start ?? Infinity;
    const mine = reruns.filter((r) => r.after >= f.start && r.after < next).map((r) => r.run);
    const stall = stallFrom(f.kind === 'quorum-loss' || f.kind === 'quorum-loss-fe-kill' ? f.healed : f.start);
    const m: FaultMeasure = {
      kind: f.kind,
      target: f.target,
      start: f.start,
      healed: f.healed,
      reruns: mine.length,
      rerunsAfterSuccess: mine.filter((r) => rerunAfterSuccess.has(r.id)).length,
    };
    if (stall !== undefined) m.stallMs = stall;
    if (f.electionMs !== undefined) m.electionMs = f.electionMs;
    if (f.error !== undefined) m.error = f.error;
    return m;
  });
  const quiet: number[] = [];
  for (let t = input.window.start + 3000; t < input.window.end - 3000; t += 500) {
    if (faults.some((f) => t > f.start - 1000 && t < f.healed + 5000)) continue;
    const s = stallFrom(t);
    if (s !== undefined) quiet.push(s);
  }

  const counts: Partial<Record<ViolationKind, number>> = {};
  for (const x of out) counts[x.kind] = (counts[x.kind] ?? 0) + 1;
  const baseline: CheckReport['baseline'] = { n: quiet.length };
  const p50 = pctl(quiet, 0.5);
  const p90 = pctl(quiet, 0.9);
  if (p50 !== undefined) baseline.p50 = p50;
  if (p90 !== undefined) baseline.p90 = p90;
  return {
    violations: out,
    counts,
    faults: measures,
    baseline,
    totals: {
      submitted: input.submissions.length,
      acked: input.submissions.filter((s) => s.jobId !== undefined).length,
      cancelAsked: input.submissions.filter((s) => s.cancelAskedAt !== undefined).length,
      jobsStored: jobs.size,
      tasks: finalTasks.length,
      runs: runs.length,
      reruns: reruns.length,
      rerunsAfterSuccess: rerunAfterSuccess.size,
      runsSignalled: runs.filter((r) => r.how === 'signalled').length,
      runsVanished: runs.filter((r) => r.how === 'vanished').length,
      revisions: input.events.length > 0 ? (input.events[input.events.length - 1]?.kv.modRevision ?? 0) : 0,
    },
  };
}

/** A few lines for a log or a failure message: totals, violations by kind (with examples), faults. */
export function summarize(r: CheckReport, examples = 3): string {
  const t = r.totals;
  const lines = [
    `jobs: ${t.submitted} submitted, ${t.acked} acknowledged, ${t.cancelAsked} cancels asked, ${t.jobsStored} stored; ${t.tasks} tasks, ${t.runs} runs ` +
      `(${t.reruns} re-runs, ${t.rerunsAfterSuccess} after a success; ${t.runsSignalled} signalled, ${t.runsVanished} vanished); ${t.revisions} revisions`,
  ];
  if (r.violations.length === 0) lines.push('violations: none');
  for (const [kind, n] of Object.entries(r.counts)) {
    lines.push(`violation ${kind}: ${n}`);
    for (const x of r.violations.filter((y) => y.kind === kind).slice(0, examples)) lines.push(`  - ${x.detail}`);
  }
  for (const f of r.faults) {
    lines.push(
      `fault ${f.kind} ${f.target} at ${hms(f.start)}: lasted ${f.healed - f.start} ms, stall ${f.stallMs ?? '-'} ms` +
        `${f.electionMs !== undefined ? `, etcd election ${f.electionMs} ms` : ''}, re-runs ${f.reruns} (${f.rerunsAfterSuccess} after success)${f.error ? `, ERROR ${f.error}` : ''}`,
    );
  }
  lines.push(`stall at fault-free instants: p50 ${r.baseline.p50 ?? '-'} ms, p90 ${r.baseline.p90 ?? '-'} ms (${r.baseline.n} instants)`);
  return lines.join('\n');
}
