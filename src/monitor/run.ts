/**
 * One task attempt on a node, apart from the node's bookkeeping: the attempt an RU record names,
 * the `running` task record written when it starts (in a transaction fenced on the RU record's
 * revision; only the fence, a linearizable read, when its placement wrote the record), what the
 * executor is given, and how an attempt that a previous life of the monitor started ended.
 */
import type { RunObservation } from './load.ts';
import type { JobSpec } from '../model/types.ts';
import type { Keys } from '../state/keys.ts';
import type { LiveTaskRecord } from '../state/live-records.ts';
import { FREE_RU_VALUE, type PlacedRuRecord } from '../state/records.ts';
import { outcomeTaskRecord, type TaskOutcome } from '../state/release.ts';
import type { DirectStoreAccess, TxnRequest } from '../store/types.ts';
import type { Logger } from '../util/log.ts';
import type { Executor, SuccessReport, TaskExit, TaskHandle, TaskLaunch } from './executor.ts';
import type { HeldAttempt } from './outcomes.ts';

/** A task whose process this node started and that has not ended. */
export interface Run extends HeldAttempt {
  /** The RU record's current revision: fences the writes about the attempt. */
  rev: number;
  startedAt: number;
  handle: TaskHandle | undefined;
  stopped: boolean;
  reported: boolean;
  /** What the run tells the profile learner (when the executor measures rates). */
  obs: RunObservation | undefined;
}

/** The attempt RU `index`'s record names, placed at revision `rev`. */
export function attemptOf(index: number, rec: PlacedRuRecord, rev: number): HeldAttempt {
  return { job: rec.job, task: rec.task, commitId: rec.commitId, ruIndex: index, rec, placedRevision: rev };
}

export function newRun(index: number, rec: PlacedRuRecord, rev: number, now: number): Run {
  // Every field written out (no spread of attemptOf's object): built by a spread, each of a hollow
  // process's running tasks got a hidden class of its own (some 360 bytes more per task).
  return {
    job: rec.job,
    task: rec.task,
    commitId: rec.commitId,
    ruIndex: index,
    rec,
    placedRevision: rev,
    rev,
    startedAt: now,
    handle: undefined,
    stopped: false,
    reported: false,
    obs: undefined,
  };
}

/**
 * Records the task `running` on `server`, with the node's disconnect grace, only if the RU still
 * holds this attempt: the RU record's revision is the fence. The RU record is written again,
 * unchanged, in the same transaction: its revision moves on, and the node takes the new one as
 * the attempt's fence when its watch brings it, as for an adopted attempt (the attempt's files
 * keep the placement's revision in their names). An attempt whose placement recorded
 * it running (PlacedRuRecord.startRecorded) is only fenced: the compare and a read of the RU,
 * which etcd answers as a linearizable read (no write, no watch event).
 */
export function startTxn(keys: Keys, server: string, run: Run, graceMs: number): TxnRequest {
  const ruKey = keys.ru({ server, index: run.ruIndex });
  const fence = [{ key: ruKey, target: 'mod' as const, op: '==' as const, value: run.rev }];
  // The read of the RU is what makes the fence linearizable: etcd serves a transaction with no
  // operation at all as a serializable read, from whichever member the node talks to, and a member
  // behind the leader would refuse a placement it has not seen yet (the task would never start).
  if (run.rec.startRecorded) return { compare: fence, success: [{ type: 'get', key: ruKey }] };
  const running: LiveTaskRecord = {
    job: run.job,
    index: run.task,
    state: 'running',
    ru: { server, index: run.ruIndex },
    attempt: run.rec.attempt,
    placedAt: run.rec.since,
    commitId: run.commitId,
    agent: run.rec.agent,
    placedRevision: run.placedRevision,
    startedAt: run.startedAt,
    server,
    nodeGraceMs: graceMs,
    ...(run.rec.previous ? { previous: run.rec.previous } : {}),
    ...(run.rec.moves ? { moves: run.rec.moves } : {}),
  };
  // The RU record is put again as it is: the job's owner follows RUs, not task records, and
  // reads the task record when the RU of one of its tasks changes (owner/ru-events.ts).
  return {
    compare: fence,
    success: [
      { type: 'put', key: keys.task(run.job, run.task), value: JSON.stringify(running) },
      { type: 'put', key: ruKey, value: JSON.stringify(run.rec) },
    ],
  };
}

/** What the executor is given: the duration from the RU record or the job, the job's command. */
export function launchOf(run: Run, server: string, spec: JobSpec | undefined): TaskLaunch {
  // The placement's revision names the attempt (its files, its runs): the RU record's may have moved on
  // already (a start that put it again, seen before the launch).
  const launch: TaskLaunch = { job: run.job, task: run.task, ruIndex: run.ruIndex, revision: run.placedRevision, server, attempt: run.rec.attempt };
  const duration = run.rec.durationMs ?? spec?.durationMs;
  if (duration !== undefined) launch.durationMs = duration;
  if (spec?.command) launch.command = spec.command;
  return launch;
}

/**
 * What a task's supervisor writes if the task succeeds and the monitor cannot report it (see
 * state/node-fence.ts): the records the monitor's release writes (outcomes.ts reportOutcome), fenced on the RU
 * record's revision the attempt holds now (the handle's setRevision moves it on).
 */
export function successReport(keys: Keys, server: string, run: Run, store: DirectStoreAccess): SuccessReport {
  const ref = { server, index: run.ruIndex };
  const record = outcomeTaskRecord(
    ref,
    run.placedRevision,
    run.rec,
    { state: 'succeeded', endedAt: 0, exitCode: 0 },
    {
      startedAt: run.startedAt,
      server,
      placedRevision: run.placedRevision,
    },
  );
  return { store, ruKey: keys.ru(ref), rev: run.rev, taskKey: keys.task(run.job, run.task), record, freeValue: FREE_RU_VALUE };
}

/**
 * How an attempt started by a previous life of this monitor ended, from the executor's exit
 * record; one still running is stopped first (it is no longer supervised), and counts as
 * ended only if it exited by itself meanwhile.
 */
export async function previousRunOutcome(
  ex: Executor,
  a: { job: string; task: number; revision: number },
  now: () => number,
  log: Logger,
): Promise<TaskOutcome | undefined> {
  const prev = ex.previousRun?.(a);
  let exit: TaskExit | undefined;
  if (prev?.kind === 'exited') exit = prev.exit;
  else if (prev?.kind === 'running' && ex.stopOrphan) {
    log.warn({ job: a.job, task: a.task, taskPid: prev.pid }, 'an attempt of a previous life of this monitor is still running; stopping it');
    exit = await ex.stopOrphan(a, prev.pid);
  }
  if (!exit) return undefined;
  return {
    state: exit.state,
    endedAt: now(),
    ...(exit.exitCode !== undefined ? { exitCode: exit.exitCode } : {}),
    ...(exit.message !== undefined ? { message: exit.message } : {}),
  };
}
