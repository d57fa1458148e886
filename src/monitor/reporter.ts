/**
 * Gets the node monitor's journalled outcomes into the store. An outcome is appended to the
 * journal (durably) the moment a task ends, then written with the fenced writes of outcomes.ts;
 * what the store would not take stays journalled and is tried again, with a growing pause, until
 * it is in, and again whenever the monitor kicks the reporter (a task ended, the lease was
 * confirmed again, the node registered). While the node is not registered the registration
 * writes them itself. An entry leaves the journal once the store has it or has moved on.
 */
import type { Clock } from '../util/clock.ts';
import { errorMessage } from '../util/errors.ts';
import type { Logger } from '../util/log.ts';
import { entryKey, type OutcomeEntry, type OutcomeJournal } from './journal.ts';
import { reportOutcome, type NodeStore } from './outcomes.ts';

export interface OutcomeReporterOptions {
  n: NodeStore;
  journal: OutcomeJournal;
  clock: Clock;
  log: Logger;
  /** False while the node registers (the registration writes the journal then). */
  mayReport: () => boolean;
  /** An outcome this monitor wrote is in the store. */
  onWritten: (e: OutcomeEntry) => void;
  /** The store has the outcome (written now, or settled before). */
  onSettled?: (e: OutcomeEntry) => void;
  track: (p: Promise<unknown>) => void;
}

export class OutcomeReporter {
  private flushing: Promise<void> | undefined;
  private again = false;
  private closed = false;

  constructor(private readonly o: OutcomeReporterOptions) {}

  /**
   * Journals an outcome: visible at once (the RU's events then cannot start the task again),
   * durable when the promise resolves, which never rejects.
   */
  async record(e: OutcomeEntry): Promise<void> {
    try {
      await this.o.journal.append(e);
    } catch (err) {
      // Still held in memory and reported; only a restart before that would lose it.
      this.o.log.error({ job: e.job, task: e.task, err: errorMessage(err), journal: this.o.journal.location }, 'could not write the outcome journal');
    }
  }

  /** One try at writing an outcome; it leaves the journal once the store has it. Throws otherwise. */
  async reportNow(e: OutcomeEntry): Promise<void> {
    const how = await reportOutcome(this.o.n, e);
    await this.o.journal.remove(entryKey(e));
    this.o.onSettled?.(e);
    if (how === 'written') this.o.onWritten(e);
  }

  /** Writes what the journal holds, now and again until the store has all of it. */
  kick(): void {
    if (this.closed) return;
    if (this.flushing) {
      this.again = true;
      return;
    }
    this.flushing = this.flush().finally(() => {
      this.flushing = undefined;
    });
    this.o.track(this.flushing);
  }

  close(): void {
    this.closed = true;
  }

  private async flush(): Promise<void> {
    let delay = 100;
    do {
      this.again = false;
      let failed = 0;
      for (const e of this.o.journal.entries()) {
        if (this.closed || !this.o.mayReport()) return;
        try {
          await this.reportNow(e);
        } catch (err) {
          if (++failed === 1) this.o.log.warn({ job: e.job, task: e.task, err: errorMessage(err) }, 'outcome not in the store yet; it stays journalled');
        }
      }
      if (failed > 0) {
        await this.o.clock.sleep(delay);
        delay = Math.min(delay * 2, 2000);
        this.again = true;
      }
    } while (this.again && !this.closed && this.o.mayReport() && this.o.journal.entries().length > 0);
  }
}
