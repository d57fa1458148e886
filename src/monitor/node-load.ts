/**
 * One node's load check (paper §5.2), as its monitor runs it after every change of its RUs or
 * tasks: each task's slowdown (load.ts), reports of the tasks well below their expected rate
 * (`reports/<job>/<task>`, deleted once they recover), what the profile learner is to be told,
 * and the block of the server with its hysteresis and time limit (runtime-loop.ts).
 */
import { LiveKeys, type LoadReportRecord } from '../state/live-records.ts';
import type { Keys } from '../state/keys.ts';
import type { PlacedRuRecord } from '../state/records.ts';
import type { ClusterStore } from '../store/types.ts';
import type { Clock } from '../util/clock.ts';
import type { Logger } from '../util/log.ts';
import type { Executor } from './executor.ts';
import { assessLoad, observeRuns, type SlowdownModel } from './load.ts';
import type { Run } from './run.ts';
import { BlockState, DEFAULT_RUNTIME, DEFAULT_RUNTIME_LOOP, recoverShare } from './runtime-loop.ts';

export interface NodeLoadHost {
  store: ClusterStore;
  keys: Keys;
  clock: Clock;
  executor: Executor;
  loadThreshold: number;
  slowdown: SlowdownModel | undefined;
  usableLeaseId(): string | undefined;
  track(p: Promise<unknown>): void;
  /**
   * Blocks on: a slow task keeps new placements off the server until it recovers. Default
   * DEFAULT_RUNTIME.block (runtime-loop.ts), the simulator's too. Off, the check still reports slow
   * tasks (moves of migratable jobs act on them) and measures what the learner is told; only the
   * server is never blocked. A monitor or a hollow process sets it on the host it gives its nodes
   * (MonitorOptions.block, HollowOptions.block), which each node hands to its load check.
   */
  block?: boolean;
}

export class NodeLoad {
  /** No new placements here: a task runs well below its rate (until it recovers, or the block's time limit). */
  blocked = false;
  private blockState: BlockState<Run> | undefined;
  private readonly sum: number[] = [];
  private readonly live: LiveKeys;
  /** What the last look saw (each RU's revision if busy, each run's RU and whether it started), and the scratch for the next. */
  private seen: number[] = [];
  private next: number[] = [];

  constructor(
    private readonly h: NodeLoadHost,
    private readonly server: { id: string; rus: number },
    private readonly log: () => Logger,
  ) {
    this.live = new LiveKeys(h.keys);
  }

  /**
   * Looks at the node's tasks now; true when the server's block began or ended. Unless `force`
   * (the real monitor's periodic look, whose tasks' measured rates change by themselves), a look
   * at an unblocked server whose occupants and runs are those of the last look changes nothing
   * and is skipped: a task's slowdown, its rate under the simulated executor and its observation
   * for the learner depend only on them. A task's placement and start each bring two looks (the
   * RU's event and the start), its end two more; the hollow process spent a quarter of its time in
   * them.
   */
  check(rus: Iterable<{ rec: PlacedRuRecord | undefined; rev: number }>, running: { values(): Iterable<Run> }, force = false): boolean {
    const h = this.h;
    const ruList = [...rus];
    if (!this.changed(ruList, running) && !force && !this.blocked) return false;
    // Tasks below the recovery share keep a blocked server blocked; those below the threshold are
    // slow (reported, and they block it).
    const rules = { slowBelow: h.loadThreshold, recoverAbove: recoverShare(h.loadThreshold), maxBlockMs: DEFAULT_RUNTIME_LOOP.maxBlockMs };
    this.blockState ??= new BlockState<Run>(rules);
    const below = assessLoad(ruList, running.values(), this.server.rus, rules.recoverAbove, h.slowdown, this.sum);
    if (h.executor.measuresRate) observeRuns(ruList, running.values(), this.sum, this.server.rus, h.clock.now());
    // A reported task that recovered: its report goes (a report stands for a task slow now).
    for (const run of running.values()) {
      if (run.reported && !below.some((b) => b.run === run)) {
        run.reported = false;
        h.track(h.store.delete(this.live.report(run.job, run.task)).catch(() => 0));
      }
    }
    for (const { run, rate } of below) {
      if (rate >= rules.slowBelow || run.reported) continue;
      run.reported = true;
      const rep: LoadReportRecord = { job: run.job, task: run.task, server: this.server.id, rate, at: h.clock.now() };
      const lease = h.usableLeaseId();
      if (lease) h.track(h.store.put(this.live.report(run.job, run.task), JSON.stringify(rep), { lease }).catch(() => 0));
      // The run-time loop acts on it (the block below, a move, a scale-out): nothing for an operator to do.
      this.log().info({ job: run.job, task: run.task, rate: Number(rate.toFixed(2)) }, 'task well below its expected rate');
    }
    // Blocking is one of the run-time loop's parts (DEFAULT_RUNTIME, the simulator's too), switched by the host.
    const next =
      this.blockState.update(
        h.clock.now(),
        below.map((b) => [b.run, b.rate] as const),
      ) &&
      (h.block ?? DEFAULT_RUNTIME.block);
    if (next === this.blocked) return false;
    this.blocked = next;
    this.log().info({ blocked: next }, next ? 'no new placements here until the slow task recovers' : 'accepting placements again');
    return true;
  }

  /** Whether the occupants or runs differ from the last look's (and remembers these). */
  private changed(rus: readonly { rec: PlacedRuRecord | undefined; rev: number }[], running: { values(): Iterable<Run> }): boolean {
    const cur = this.next;
    cur.length = 0;
    for (const r of rus) cur.push(r.rec?.state === 'busy' ? r.rev : 0);
    for (const run of running.values()) cur.push(run.ruIndex * 2 + (run.handle ? 1 : 0));
    const last = this.seen;
    this.next = last;
    this.seen = cur;
    if (cur.length !== last.length) return true;
    for (let i = 0; i < cur.length; i++) if (cur[i] !== last[i]) return true;
    return false;
  }
}
