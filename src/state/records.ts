/**
 * The records of the scheduling state in the store (RUs, servers, jobs, placed tasks) and their
 * parsing: the shared vocabulary of agents, monitors and the front-end.
 */
import type { JobSpec, JobState, RuRecord, RuRef, ServerSpec, TaskRecord, TaskState } from '../model/types.ts';
import type { Occupant } from '../sampling/ru-index.ts';
import type { KeyValue } from '../store/types.ts';
import type { Keys } from './keys.ts';
import { internVector } from '../util/intern.ts';

/** JSON codecs for the records kept in the store. Parsing is defensive: the store is shared. */

export interface ServerRecord extends ServerSpec {
  state: 'up' | 'down';
}

export interface JobRecord {
  spec: JobSpec;
  state: JobState;
  placed: number;
  updatedAt: number;
  message?: string;
}

/** An earlier attempt of a task, kept on its record when it is placed again. */
export interface AttemptSummary {
  attempt: number;
  ru?: RuRef;
  placedAt?: number;
  startedAt?: number;
  endedAt?: number;
  /** How it ended (lost, mostly), and why. */
  state: TaskState;
  message?: string;
}

/** RU record as written by a placement: who, what it causes, and what it was scored against. */
export interface PlacedRuRecord extends RuRecord {
  state: 'busy' | 'reserved';
  job: string;
  task: number;
  caused: number[];
  priority: number;
  agent: string;
  since: number;
  attempt: number;
  /**
   * The server epoch revision the placement was scored against (server-scope audit). Under the
   * `ru` scope agents do not follow epochs, so this is only the last epoch the agent knew.
   */
  basedOn: number;
  commitId: string;
  /** Modelled duration for the simulated executor, ms. */
  durationMs?: number;
  /** Earlier attempts of the task (copied into every task record written for this attempt). */
  previous?: AttemptSummary[];
  /**
   * A move's new copy, held: the RU is the task's, but its monitor starts it only once the job's
   * owner has seen the old copy stop and written the record again without the hold (never two
   * copies at once).
   */
  hold?: MoveSource;
  /** A move's old copy: its monitor stops it and frees the RU (the reason is logged). */
  stop?: string;
  /** Moves of the task so far, this placement included (copied to the task record when it starts). */
  moves?: number;
  /**
   * The placement wrote the task's record `running` itself (placementRecordsStart): the monitor
   * confirms that the RU still holds the attempt with a compare that writes nothing, and starts it.
   * Without it (a gang's confirmed reservation, a move's copy, a task placed again) the monitor
   * writes the `running` record as it starts the task.
   */
  startRecorded?: true;
  /**
   * How the RU's previous task ended, as its freed RU carried it (`last`, freedRuValue): copied by
   * the placement that took the RU next, whose compare on the RU's revision makes it exactly that
   * value. An owner that looks for that task's outcome after the RU was placed again finds it here
   * even once the free is compacted out of the store's history (ru-history.ts).
   */
  prev?: Record<string, unknown>;
}

/** Where a moved task ran before: the RU and the placement (commit) of its old copy. */
export interface MoveSource {
  server: string;
  index: number;
  commitId: string;
}

export interface PlacedTaskRecord extends TaskRecord {
  ru: RuRef;
  basedOn: number;
  commitId: string;
  agent: string;
  /** Moves of the task so far (the run-time loop moves a task at most a few times). */
  moves?: number;
  /** This attempt is a move of the task from there: its RU is held until the old copy stopped. */
  movedFrom?: MoveSource;
  /** Written `running` by its placement (placementRecordsStart): the placement's time. */
  startedAt?: number;
  /**
   * The node's disconnect grace as the placing agent knew it (its monitor writes it again with
   * the `running` record): an owner that never saw the node waits this long once it is gone.
   */
  nodeGraceMs?: number;
}

export function parseJson<T>(kv: KeyValue | undefined): T | undefined {
  if (!kv || kv.value === '') return undefined;
  try {
    return JSON.parse(kv.value) as T;
  } catch {
    return undefined;
  }
}

/** RU records read from the store (`rus/`), by server then index; keys or values that do not parse are left out. */
export function ruRecordsByServer(k: Keys, kvs: readonly KeyValue[]): Map<string, Map<number, RuRecord>> {
  const rus = new Map<string, Map<number, RuRecord>>();
  for (const kv of kvs) {
    const ref = k.parseRu(kv.key);
    const rec = parseJson<RuRecord>(kv);
    if (!ref || !rec) continue;
    let m = rus.get(ref.server);
    if (!m) rus.set(ref.server, (m = new Map<number, RuRecord>()));
    m.set(ref.index, rec);
  }
  return rus;
}

export function occupantOf(rec: RuRecord | undefined): Occupant | null {
  if (!rec || (rec.state !== 'busy' && rec.state !== 'reserved') || !rec.job || !Array.isArray(rec.caused)) return null;
  return {
    job: rec.job,
    task: rec.task ?? 0,
    caused: internVector(rec.caused),
    priority: rec.priority ?? 0,
    state: rec.state,
    ...(typeof rec.q === 'number' && Number.isFinite(rec.q) ? { q: rec.q } : {}),
  };
}

/** Q as an RU record carries it: 4 decimals, a few bytes. */
export const storedQ = (Q: number): number => Math.round(Q * 10_000) / 10_000;

const FREED_LAST = '{"state":"free","last":';
const FREED_JOB = `${FREED_LAST}{"job":"`;

/** The stored value of a free RU. */
export const FREE_RU_VALUE = JSON.stringify({ state: 'free' } satisfies RuRecord);

/**
 * The value of an RU freed as its task ended: free, carrying the outcome its release writes to the
 * task record (`last`: the job and task first, see release.ts outcomeSummary). The task's owner
 * follows the RUs anyway (its agents sample them) and learns the outcome from this, so no
 * front-end follows `tasks/`. The next placement of the RU replaces it; the task record keeps it.
 */
export function freedRuValue(lastJson: string): string {
  return `${FREED_LAST}${lastJson}}`;
}

/** The job whose task last held a freed RU, read from the value without parsing it (job ids hold no quote). */
export function jobOfFreedRu(value: string): string | undefined {
  if (!value.startsWith(FREED_JOB)) return undefined;
  const end = value.indexOf('"', FREED_JOB.length);
  return end < 0 ? undefined : value.slice(FREED_JOB.length, end);
}

/** Whether an RU value is a free RU's (plain, or freed with its last task's outcome), without parsing it. */
export function isFreeRuValue(value: string): boolean {
  return value === FREE_RU_VALUE || value.startsWith('{"state":"free"');
}

/** The `last` of a freed RU's value as it is stored (JSON text), without parsing it; undefined for a plain free RU or any other value. */
export function lastJsonOfFreedRu(value: string): string | undefined {
  return value.startsWith(FREED_LAST) && value.endsWith('}}') ? value.slice(FREED_LAST.length, -1) : undefined;
}

/**
 * A placement's RU value: the record, with the previous task's outcome as `prev` (`prevLast`: its
 * JSON text as the freed RU carried it; left out unless it is a JSON object, since any process may
 * have written it).
 */
export function placedRuValue(rec: PlacedRuRecord, prevLast: string | undefined): string {
  let prev: unknown;
  try {
    prev = prevLast === undefined ? undefined : JSON.parse(prevLast);
  } catch {
    prev = undefined;
  }
  return JSON.stringify(prev !== null && typeof prev === 'object' && !Array.isArray(prev) ? { ...rec, prev } : rec);
}

/** The task record a freed RU carries (freedRuValue), if the value is one. */
export function lastOfFreedRu(value: string): Record<string, unknown> | undefined {
  if (value === FREE_RU_VALUE || !value.startsWith(FREED_LAST)) return undefined;
  try {
    const last = (JSON.parse(value) as { last?: unknown }).last;
    return last !== null && typeof last === 'object' ? (last as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}
