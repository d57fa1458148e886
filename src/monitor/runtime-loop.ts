/**
 * The run-time loop's rules (paper §2 and §5.2), pure and shared by the live node monitors and the
 * simulator: when a task runs below its expected rate, first act locally — keep new placements
 * away from its server until it recovers — and then, for a job that allows it, move the task to
 * a better RU. Hysteresis and rate limits keep either from oscillating:
 *
 * - a server is blocked when one of its tasks runs below `slowBelow` of its expected rate, and
 *   unblocked only once every task runs at `recoverAbove` or better;
 * - a task is moved only after it has stayed slow for `moveAfterMs`, at most `maxMovesPerTask`
 *   times, when moving is expected to finish it sooner even if the restart runs only at the
 *   recovery share (a move restarts the task: its progress is lost, and it pays `movePauseMs` to
 *   stop, place and start), and no faster than the cell-wide budget of `movesPerSecond`.
 */
import { invalid } from '../util/errors.ts';

export interface RuntimeLoopConfig {
  /** A task running below this share of its expected rate is slow (0 < x ≤ 1). */
  slowBelow: number;
  /** A blocked server accepts placements again once every task runs at or above this share. */
  recoverAbove: number;
  /** How long a task must stay slow before it is moved, ms. */
  moveAfterMs: number;
  /** The most moves of one task. */
  maxMovesPerTask: number;
  /** Moves started per second, cell-wide (a token bucket holding up to one second's worth). */
  movesPerSecond: number;
  /** What a move costs beyond the restart (stop, place, start), ms. */
  movePauseMs: number;
  /** A move must save at least this share of the time the task would still take where it is. */
  minGain: number;
  /**
   * The longest a server stays blocked for the same slow tasks, ms. Past it the server takes
   * placements again and those tasks no longer block it (a long-running task that stays slow would
   * otherwise take its server out of the cell for good); a task that turns slow later blocks again.
   */
  maxBlockMs: number;
  /**
   * Autoscale's room: a scale-out job grows only while more than this share of the cell's RUs is
   * free and no task waits to be placed, so a new task never takes an RU a waiting job needs
   * (0: only the waiting tasks are looked at).
   */
  growHeadroom: number;
}

/** The hysteresis band a node monitor uses: a blocked server recovers 0.1 above the slow share. */
export function recoverShare(slowBelow: number): number {
  return Math.min(1, slowBelow + 0.1);
}

/**
 * The run-time loop's parts on by default (paper §2 and §5.2), the same live and in the simulator
 * (test/sim/defaults-parity.test.ts holds them together); chosen by `tarcil bench truths` for the
 * best mean rank and worst case across its ground truths and profile errors (bench/README, truths):
 * none of them. Each can be switched on where it pays (learning, where declared profiles are far
 * off).
 *
 * - `block`: a server one of whose tasks runs below its expected rate takes no new placements
 *   until it recovers. Live: every node monitor (src/monitor/node-load.ts; MonitorOptions.block,
 *   `tarcil monitor|hollow|up --block`); the simulator's `tarcil`: SimRuntimeOptions.block. Slow
 *   tasks are reported either way.
 * - `learn`: new jobs are scheduled with their class's profile as learned from what the monitors
 *   measured. Live: the job owner's ProfileBook (src/state/profiles.ts, `use`; `tarcil server|up
 *   --profiles learned`); the simulator: SimRuntimeOptions.learn. The monitors measure and the
 *   front-ends write the observations either way.
 * - `move`: a slow task is placed again elsewhere. Live, only the tasks of a job that asks for it
 *   (`migratable`, off unless the job says so); the simulator's default moves none.
 */
export interface RuntimeDefaults {
  block: boolean;
  learn: boolean;
  move: boolean;
}

export const DEFAULT_RUNTIME: Readonly<RuntimeDefaults> = Object.freeze({ block: false, learn: false, move: false });

export const DEFAULT_RUNTIME_LOOP: RuntimeLoopConfig = {
  slowBelow: 0.5,
  recoverAbove: recoverShare(0.5),
  moveAfterMs: 5_000,
  maxMovesPerTask: 1,
  movesPerSecond: 2,
  movePauseMs: 2_000,
  minGain: 0.2,
  maxBlockMs: 60_000,
  growHeadroom: 0.1,
};

/** Defaults overlaid with `over`, checked: throws INVALID_ARGUMENT naming the field. */
export function runtimeLoopConfig(over: Partial<RuntimeLoopConfig> = {}): RuntimeLoopConfig {
  const c = { ...DEFAULT_RUNTIME_LOOP, ...over };
  const share = (k: keyof RuntimeLoopConfig): void => {
    const v = c[k];
    if (!(Number.isFinite(v) && v > 0 && v <= 1)) throw invalid(`runtime.${k}`, 'must be a number in (0, 1]', { value: v });
  };
  share('slowBelow');
  share('recoverAbove');
  if (c.recoverAbove < c.slowBelow) throw invalid('runtime.recoverAbove', 'must be at least slowBelow', { value: c.recoverAbove });
  for (const k of ['moveAfterMs', 'movePauseMs', 'maxMovesPerTask', 'movesPerSecond', 'maxBlockMs'] as const) {
    if (!(Number.isFinite(c[k]) && c[k] >= 0)) throw invalid(`runtime.${k}`, 'must be a number ≥ 0', { value: c[k] });
  }
  if (!(Number.isFinite(c.minGain) && c.minGain >= 0 && c.minGain < 1)) throw invalid('runtime.minGain', 'must be a number in [0, 1)', { value: c.minGain });
  if (!(Number.isFinite(c.growHeadroom) && c.growHeadroom >= 0 && c.growHeadroom < 1))
    throw invalid('runtime.growHeadroom', 'must be a number in [0, 1)', { value: c.growHeadroom });
  return c;
}

/**
 * Whether the cell has room for a scale-out job to grow: no task waits to be placed, and more than
 * `growHeadroom` of its RUs are free. The live owner and the simulator ask the same question.
 */
export function roomToGrow(cell: { freeRus: number; totalRus: number; waitingTasks: number }, c: Pick<RuntimeLoopConfig, 'growHeadroom'>): boolean {
  return cell.waitingTasks === 0 && cell.freeRus > c.growHeadroom * cell.totalRus;
}

/**
 * Whether a server should be blocked, given whether it is now and the lowest share of expected
 * rate among its running tasks (1 with none): blocks below `slowBelow`, unblocks at `recoverAbove`.
 */
export function nextBlocked(blocked: boolean, minShare: number, c: Pick<RuntimeLoopConfig, 'slowBelow' | 'recoverAbove'>): boolean {
  return blocked ? minShare < c.recoverAbove : minShare < c.slowBelow;
}

/**
 * One server's block, with its hysteresis and its time limit. `update` takes the share of expected
 * rate of every running task below the recovery share (the others count as recovered) and says
 * whether the server is blocked now.
 */
export class BlockState<K> {
  blocked = false;
  /** When the current block began (NaN when not blocked). */
  since = NaN;
  /** Slow tasks that have had their block: they do not block the server again while they stay slow. */
  private readonly excused = new Set<K>();

  constructor(private readonly c: Pick<RuntimeLoopConfig, 'slowBelow' | 'recoverAbove' | 'maxBlockMs'>) {}

  update(now: number, belowRecovery: readonly (readonly [K, number])[]): boolean {
    let min = 1;
    const still = new Set<K>();
    for (const [k, share] of belowRecovery) {
      if (this.excused.has(k)) {
        still.add(k);
        continue;
      }
      if (share < min) min = share;
    }
    // A task that recovered (or ended) is excused no more.
    for (const k of this.excused) if (!still.has(k)) this.excused.delete(k);
    if (this.blocked && now - this.since >= this.c.maxBlockMs) {
      for (const [k] of belowRecovery) this.excused.add(k);
      this.blocked = false;
      this.since = NaN;
      return false;
    }
    const next = nextBlocked(this.blocked, min, this.c);
    if (next && !this.blocked) this.since = now;
    if (!next) this.since = NaN;
    this.blocked = next;
    return next;
  }

  /** When the block ends by its time limit, if nothing else ends it first. */
  deadline(): number {
    return this.blocked ? this.since + this.c.maxBlockMs : Infinity;
  }
}

/**
 * The time a move saves, ms: finishing where it is (the work left at the rate now) against a
 * restart elsewhere (the pause, then all of its work at the rate expected there). Negative when
 * staying is faster.
 */
export function moveGainMs(o: { remaining: number; rateNow: number; work: number; rateAfter: number; pauseMs: number }): number {
  const stay = o.rateNow > 0 ? o.remaining / o.rateNow : Infinity;
  const move = o.pauseMs + (o.rateAfter > 0 ? o.work / o.rateAfter : Infinity);
  return stay - move;
}

/**
 * Whether a move is worth it: it saves at least `minGain` of the time the task would still take.
 * `rateAfter` is the task's rate alone on an RU; the restart is counted at only `recoverAbove` of
 * it, the share at which the loop calls a task recovered: the new RU has neighbours too, and a
 * move judged against a restart free of interference (the rule before) mostly finished later than
 * it expected — at the committed truth of `tarcil bench truths`, W3's moved tasks took a median
 * 1.36 times their estimate and their jobs ended worse off than unmoved (bench/README, truths).
 */
export function moveWorthIt(
  o: { remaining: number; rateNow: number; work: number; rateAfter: number },
  c: Pick<RuntimeLoopConfig, 'movePauseMs' | 'minGain' | 'recoverAbove'>,
): boolean {
  const gain = moveGainMs({ ...o, rateAfter: o.rateAfter * c.recoverAbove, pauseMs: c.movePauseMs });
  const stay = o.rateNow > 0 ? o.remaining / o.rateNow : Infinity;
  return gain > 0 && gain >= c.minGain * stay;
}

/** The cell-wide budget of moves: a token bucket refilled at `movesPerSecond`, one second deep. */
export class MoveBudget {
  private tokens: number;
  private last: number;

  constructor(
    private readonly c: RuntimeLoopConfig,
    now: number,
  ) {
    this.tokens = c.movesPerSecond;
    this.last = now;
  }

  /** Takes one move if the budget allows it now. */
  take(now: number): boolean {
    const cap = this.c.movesPerSecond;
    if (now > this.last) {
      this.tokens = Math.min(cap, this.tokens + ((now - this.last) / 1000) * cap);
      this.last = now;
    }
    if (this.tokens < 1) return false;
    this.tokens -= 1;
    return true;
  }
}
