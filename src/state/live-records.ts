/**
 * The records of the live cell (jobs, tasks, servers, owners, load reports, stored decisions) and
 * their keys: what the front-end, the job owners and the node monitors read and write.
 */
import type { JobState, TaskRecord, TaskState } from '../model/types.ts';
import type { Keys } from './keys.ts';
import type { DecisionRecord } from './decisions.ts';
import { parseJson, type AttemptSummary, type JobRecord, type MoveSource, type ServerRecord } from './records.ts';
import type { KeyValue } from '../store/types.ts';

/**
 * Records of the live cluster (job lifecycle, ownership, monitors), written next to the core's
 * records in the same key layout.
 *
 * Task states: queued → placed (agent commit) → running (monitor) → succeeded | failed |
 * cancelled | lost; a task's first placement writes it running itself, and its monitor starts it
 * without a write (state/placement.ts placementRecordsStart). A lost task is placed again by its
 * job's owner (`rescheduled` counts it). Job states: queued → admitted → placed → running → succeeded | failed | cancelled, a summary the
 * owner keeps of its tasks.
 */
export interface LiveJobRecord extends JobRecord {
  submittedAt: number;
  /** Agent of the owner that last wrote the record. */
  owner?: string;
  cancelRequested?: boolean;
  finishedAt?: number;
  /** The request id it was submitted with (qualified by its namespace), whose record retention deletes with it. */
  request?: string;
  rescheduled?: number;
  /** Tasks the run-time loop added to a scale-out job (spec.tasks counts them). */
  scaledOut?: number;
  taskStates?: Partial<Record<TaskState, number>>;
  /**
   * Every change of an RU about this job up to this revision is in the job's records: a task's
   * outcome that is not is in the RU's history after it (state/ru-history.ts).
   */
  seen?: number;
}

/** Earlier attempts kept per task (the latest ones). */
export const KEPT_ATTEMPTS = 10;

/** The history a new placement of the task carries: its earlier attempts and the one that just ended. */
export function attemptHistory(rec: LiveTaskRecord | undefined): AttemptSummary[] | undefined {
  if (!rec || rec.ru === undefined) return rec?.previous;
  const last: AttemptSummary = { attempt: rec.attempt, ru: rec.ru, state: rec.state };
  if (rec.placedAt !== undefined) last.placedAt = rec.placedAt;
  if (rec.startedAt !== undefined) last.startedAt = rec.startedAt;
  if (rec.endedAt !== undefined) last.endedAt = rec.endedAt;
  if (rec.message !== undefined) last.message = rec.message;
  return [...(rec.previous ?? []), last].slice(-KEPT_ATTEMPTS);
}

/**
 * The revision of the RU record that placed the attempt a task record names: the record's
 * `placedRevision` (its monitor's `running` record and every outcome carry it), or, for a record
 * its placement wrote running, the record's own revision (written with the RU record).
 */
export function placedRevisionOf(rec: LiveTaskRecord, modRevision: number): number | undefined {
  return rec.placedRevision ?? (rec.state === 'running' ? modRevision : undefined);
}

export interface LiveTaskRecord extends TaskRecord {
  /** Earlier attempts of this task, oldest first (see attemptHistory). */
  previous?: AttemptSummary[];
  commitId?: string;
  agent?: string;
  /** Revision of the RU record that placed this attempt: fences the monitor's writes. */
  placedRevision?: number;
  startedAt?: number;
  server?: string;
  logPath?: string;
  /** What the task's node measured over its run, for the profile learner (state/profiles.ts). */
  observed?: { share: number; pressure: number[]; ms: number };
  /** Moves of the task by the run-time loop so far. */
  moves?: number;
  /** This attempt is a move from there: its RU is held until the old copy stopped (owner/moves.ts). */
  movedFrom?: MoveSource;
  /**
   * The disconnect grace of the attempt's node, as the placing agent knew it from the node's
   * server record and as its monitor wrote it again with the `running` record: an owner that never
   * saw the node registered (it started, or adopted the job, after the node left) waits this long
   * from when it found the node gone, not the default.
   */
  nodeGraceMs?: number;
}

/**
 * Value of `owners/<job>`: the owner's lease (not bound to it: the record says whose the job was
 * after that lease is gone, which is how the survivors find the jobs to adopt).
 */
export interface OwnerRecord {
  agent: string;
  process: string;
  since: number;
  /** Absent in a record written by the layout before members/ (bound to that lease instead). */
  lease?: string;
}

/** The owner lease an `owners/<job>` record names: its value's, or the key's (the older layout's). */
export function ownerLeaseOf(kv: KeyValue | undefined): string | undefined {
  if (!kv) return undefined;
  const lease = parseJson<OwnerRecord>(kv)?.lease;
  if (typeof lease === 'string' && lease !== '') return lease;
  return kv.lease && kv.lease !== '0' ? kv.lease : undefined;
}

/** Value of `members/<lease>`: a front-end while its owner lease lives. */
export interface MemberRecord {
  process: string;
  since: number;
  /** It owns jobs with tasks not yet placed (the freed-RU handoff shares servers among these). */
  placing: boolean;
  /** The store layout its release writes (owner/layout.ts); absent: layout 2. */
  layout?: number;
  /**
   * Since when this front-end has kept the task ends its view saw (owner/recent-ends.ts):
   * a younger one leaves orphaned jobs to the older members (adoption.ts). Absent: not known.
   */
  endsSince?: number;
}

/** Value of `requests/<id>`: the job a client request created, and a digest of its spec. */
export interface RequestRecord {
  job: string;
  digest: string;
  at: number;
}

/** A node's server record as its monitor registers it. */
export interface LiveServerRecord extends ServerRecord {
  /** host:port of the node's NodeMonitor service. */
  endpoint?: string;
  /** The load monitor saw a task well below its expected rate: no new placements here. */
  blocked?: boolean;
  executor?: string;
  /**
   * How long the node keeps its tasks running after it last confirmed its lease and the lease's
   * TTL ran out (its `--disconnect-grace`). Its tasks may be placed elsewhere only once the lease
   * has expired in the store and this long again has passed (plus a margin for clock rates).
   */
  disconnectGraceMs?: number;
}

/**
 * Value of `cordons/<server>`: the node takes no new placements (`cordon`), and with `drain` its
 * running tasks are stopped at `deadlineAt` (the monitor records them lost, so their owners place
 * them again elsewhere). Written by a front-end (SetNodeScheduling), without a lease.
 */
export interface CordonRecord {
  server: string;
  mode: 'cordon' | 'drain';
  /** When it was cordoned or drained (ms since the epoch, the front-end's clock). */
  since: number;
  /** drain: when the tasks still running are stopped (ms since the epoch). */
  deadlineAt?: number;
  reason?: string;
  /** The front-end process that wrote it. */
  by?: string;
}

/** Value of `decisions/<job>`: the decisions made for the job, newest last. */
export interface StoredDecisions {
  records: DecisionRecord[];
  inProgress: boolean;
  updatedAt: number;
}

/** A load report: the task runs well below its expected rate (paper §5.2). */
export interface LoadReportRecord {
  job: string;
  task: number;
  server: string;
  rate: number;
  at: number;
}

const FINAL_JOB_STATES: ReadonlySet<JobState> = new Set<JobState>(['succeeded', 'failed', 'cancelled']);
const FINAL_TASK_STATES: ReadonlySet<TaskState> = new Set<TaskState>(['succeeded', 'failed', 'cancelled']);

export function isFinalJob(s: JobState | undefined): boolean {
  return s !== undefined && FINAL_JOB_STATES.has(s);
}
export function isFinalTask(s: TaskState | undefined): boolean {
  return s !== undefined && FINAL_TASK_STATES.has(s);
}

/** Keys the live cluster adds to the core's layout (same prefix). */
export class LiveKeys {
  constructor(readonly keys: Keys) {}
  reports(): string {
    return `${this.keys.prefix}reports/`;
  }
  jobReports(job: string): string {
    return `${this.keys.prefix}reports/${job}/`;
  }
  report(job: string, task: number): string {
    return `${this.keys.prefix}reports/${job}/${String(task).padStart(6, '0')}`;
  }
  /** `requests/<id>` → {@link RequestRecord}: a client's idempotency key, written with the job. */
  request(id: string): string {
    return `${this.keys.prefix}requests/${id}`;
  }
  /** `tasks/<job>/<idx>` → {job, index}. */
  parseTask(key: string): { job: string; index: number } | undefined {
    return jobAndIndex(this.keys.allTasks(), key);
  }
  /** `reports/<job>/<task>` → {job, index}. */
  parseReport(key: string): { job: string; index: number } | undefined {
    return jobAndIndex(this.reports(), key);
  }
}

/** `<base><job>/<index>` → {job, index}. */
function jobAndIndex(base: string, key: string): { job: string; index: number } | undefined {
  if (!key.startsWith(base)) return undefined;
  const rest = key.slice(base.length);
  const slash = rest.lastIndexOf('/');
  if (slash <= 0) return undefined;
  const index = Number(rest.slice(slash + 1));
  return Number.isInteger(index) ? { job: rest.slice(0, slash), index } : undefined;
}
