/**
 * After a monitor restarts: the successes its previous life never reported, found beside their
 * logs by the process executor, journalled and reported like any outcome.
 */
import type { PlacedRuRecord } from '../state/records.ts';
import type { Logger } from '../util/log.ts';
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
