/**
 * A node's cordon and drain (`tarcil node`): the operator's record as last read, and the timer
 * that stops the tasks still running when a drain's deadline comes.
 */
import type { CordonRecord } from '../state/live-records.ts';
import type { Clock, Timer } from '../util/clock.ts';
import type { Logger } from '../util/log.ts';

/** What the drain uses of its node. */
export interface DrainNode {
  clock: Clock;
  server: string;
  log(): Logger;
  /** Tasks running on the node now. */
  running(): number;
  dead(): boolean;
  /** Kills every task still running, recorded lost with `why`. */
  stopRunning(why: string): void;
}

export class NodeDrain {
  /** The operator's cordon or drain of this node (`cordons/<id>`), as last read. */
  private cordon: CordonRecord | undefined;
  /** Stops the tasks still running when a drain's deadline comes. */
  private drainTimer: Timer | undefined;

  constructor(private readonly d: DrainNode) {}

  /** The cordon record of this node changed (undefined: uncordoned). Agents keep placements away themselves. */
  setCordon(rec: CordonRecord | undefined): void {
    const was = this.cordon;
    this.cordon = rec;
    this.drainTimer?.cancel();
    this.drainTimer = undefined;
    if (rec?.mode !== was?.mode || rec?.deadlineAt !== was?.deadlineAt) {
      if (rec)
        this.d.log().info(
          {
            mode: rec.mode,
            deadline: rec.deadlineAt !== undefined ? new Date(rec.deadlineAt).toISOString() : undefined,
            reason: rec.reason,
            running: this.d.running(),
          },
          rec.mode === 'drain' ? 'draining: no new placements; running tasks finish or are stopped at the deadline' : 'cordoned: no new placements',
        );
      else if (was) this.d.log().info('uncordoned: placements welcome again');
    }
    if (rec?.mode !== 'drain' || rec.deadlineAt === undefined || this.d.dead()) return;
    const wait = rec.deadlineAt - this.d.clock.now();
    if (wait <= 0) this.drainDue();
    else this.drainTimer = this.d.clock.setTimer(wait, () => this.drainDue());
  }

  /** Draining, and past the deadline: a task still here (or starting now) is stopped. */
  drainPassed(): boolean {
    return this.cordon?.mode === 'drain' && this.cordon.deadlineAt !== undefined && this.d.clock.now() >= this.cordon.deadlineAt;
  }

  /**
   * The drain's deadline: every task still running is killed and recorded lost, the path a task
   * of a node that left takes, so its owner places it again on another server (this one is
   * cordoned). Its attempt's message says why.
   */
  private drainDue(): void {
    this.drainTimer = undefined;
    if (this.d.dead() || this.d.running() === 0) return;
    const why = `node ${this.d.server} drained: the deadline passed before the task ended`;
    this.d.log().warn({ tasks: this.d.running() }, 'drain deadline passed: stopping the tasks still running; their owners place them elsewhere');
    this.d.stopRunning(why);
  }

  /** What `tarcil node`'s cordon says of this node now (undefined: none). */
  get cordonState(): CordonRecord | undefined {
    return this.cordon;
  }

  /** Closing or dead: no deadline fires any more. */
  cancel(): void {
    this.drainTimer?.cancel();
  }
}
