/**
 * The simulated executor: a timer per task, slowed by the ground-truth interference model.
 */
import type { Clock, Timer } from '../util/clock.ts';
import type { Executor, TaskExit, TaskHandle, TaskLaunch } from './executor-types.ts';

/**
 * Runs for the task's duration stretched by the interference slowdown of its server, as the
 * shared performance model computes it (src/model/perf.ts). Work is tracked as progress, so a
 * neighbour arriving halfway slows only the second half.
 */
export class SimulatedExecutor implements Executor {
  readonly kind = 'simulated' as const;
  readonly measuresRate = true;
  constructor(
    private readonly clock: Clock,
    private readonly defaultDurationMs = 1000,
  ) {}

  start(t: TaskLaunch, onExit: (e: TaskExit) => void): TaskHandle {
    return new SimulatedRun(this.clock, t.durationMs ?? this.defaultDurationMs, onExit);
  }
}

/**
 * One simulated task: a timer for its remaining work at its current slowdown. A class rather than
 * an object of closures: a hollow process holds one per running task (100,000 and more), and
 * closures cost a context each, plus an own `name` property where the sources run through tsx.
 */
class SimulatedRun implements TaskHandle {
  private slowdown = 1;
  private since: number;
  private timer: Timer | undefined;
  private done = false;

  constructor(
    private readonly clock: Clock,
    private remaining: number,
    private readonly onExit: (e: TaskExit) => void,
  ) {
    this.since = clock.now();
    this.arm();
  }

  rate(): number {
    return 1 / this.slowdown;
  }

  setSlowdown(s: number): void {
    if (this.done || s === this.slowdown) return;
    const now = this.clock.now();
    this.remaining = Math.max(0, this.remaining - (now - this.since) / this.slowdown);
    this.since = now;
    this.slowdown = s;
    this.arm();
  }

  kill(): Promise<void> {
    this.done = true;
    this.timer?.cancel();
    return Promise.resolve();
  }

  private arm(): void {
    this.timer?.cancel();
    this.timer = this.clock.setTimer(this.remaining * this.slowdown, () => {
      this.done = true;
      this.onExit({ state: 'succeeded', exitCode: 0 });
    });
  }
}
