/**
 * After a monitor restarts: the attempts its previous life left running, stopped before the node
 * registers, and the successes that life never reported, found beside their logs by the process
 * executor, journalled and reported like any outcome.
 */
import type { PlacedRuRecord } from '../state/records.ts';
import type { Logger } from '../util/log.ts';
import type { LeftRunning, TaskExit } from './executor-types.ts';
import type { Executor } from './executor.ts';
import { entryKey, outcomeEntry, type OutcomeJournal } from './journal.ts';
import type { OutcomeReporter } from './reporter.ts';
import type { Run } from './run.ts';

/** What the node lends to report its left successes. */
export interface LeftSuccessesNode {
  executor: Executor;
  journal: OutcomeJournal;
  reporter: OutcomeReporter;
  running: ReadonlyMap<number, Run>;
  track(p: Promise<unknown>): void;
  log(): Logger;
}

/**
 * Successes a previous life of the monitor never reported (it was frozen or dead when they
 * ended) whose attempts the node's RUs no longer name (placed elsewhere meanwhile). Each is
 * journalled and reported like any outcome: a success stays a success, and a new copy that has
 * not started is given back (outcomes.ts). Those the registration settled, or that are already in
 * the store, are merely settled. Returns how many were reported.
 */
export function reportLeftSuccesses(d: LeftSuccessesNode): number {
  const left = d.executor.leftSuccesses?.() ?? [];
  let n = 0;
  for (const { held, logPath, endedAt } of left) {
    const key = entryKey(held);
    if (d.journal.has(key) || [...d.running.values()].some((r) => entryKey(r) === key)) continue;
    const attempt = { ...held, rec: held.rec as unknown as PlacedRuRecord, handle: { logPath } };
    const e = outcomeEntry(attempt, { state: 'succeeded', endedAt, exitCode: 0 });
    d.track(d.reporter.record(e).then(() => d.reporter.kick()));
    n++;
  }
  if (n > 0) d.log().info({ outcomes: n }, 'successes of a previous life of this monitor found beside their logs; reporting them');
  return n;
}

/** What a restarted monitor lends to stop what its previous life left running. */
export interface LeftRunningNode {
  executor: Executor;
  journal: OutcomeJournal;
  server: string;
  log: Logger;
}

/** An attempt of a previous life stopped at start: its exit record if it ended by itself first, and what the journal holds of it. */
export interface StoppedLeftRunning extends LeftRunning {
  exit?: TaskExit;
  journalled?: string;
}

/**
 * Before a restarted monitor registers: every attempt its previous life left running is stopped
 * (its process group killed), whatever the store says of it. Its supervisor outlived that life
 * and reads the node's deadline, which the new life moves on, so it would keep it running for as
 * long as the new life lives, even once the store no longer gives the attempt to this node (placed
 * again elsewhere, its RU given to another task). Stopping them all before the registration frees
 * any RU means no RU of the node is given out while a stale copy runs there. What each left is
 * said in the log: its exit record if it ended by itself first (a success is reported after the
 * registration, reportLeftSuccesses) and the journal's entry for it, if any.
 */
export async function stopLeftRunning(d: LeftRunningNode): Promise<StoppedLeftRunning[]> {
  const ex = d.executor;
  const stopOrphan = ex.stopOrphan?.bind(ex);
  if (!ex.leftRunning || !stopOrphan) return [];
  const left = ex.leftRunning(d.server);
  return Promise.all(
    left.map(async (a) => {
      const exit = await stopOrphan(a, a.pid);
      const journalled = d.journal.entries().find((e) => e.job === a.job && e.task === a.task && e.placedRevision === a.revision)?.state;
      d.log.warn(
        { job: a.job, task: a.task, revision: a.revision, taskPid: a.pid, exitRecord: exit?.state ?? 'none', journalled: journalled ?? 'nothing' },
        'an attempt of a previous life of this monitor was still running; stopped it before registering',
      );
      return { ...a, ...(exit ? { exit } : {}), ...(journalled ? { journalled } : {}) };
    }),
  );
}
