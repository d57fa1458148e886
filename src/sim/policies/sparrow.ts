/**
 * Sparrow (Ousterhout et al., SOSP'13) and the probe-based baselines of its Fig. 3, on worker
 * queues: every server is a worker with one slot per RU and a FIFO queue. Interference-blind: a
 * worker runs a task on whichever of its RUs is free.
 *
 * - random: each task goes to a random worker's queue;
 * - per-task: two probes per task, the task joins the shorter of the two queues;
 * - batch: d·m probes for an m-task job, the tasks join the m least-loaded workers probed;
 * - batch-lb: batch sampling with late binding (§3.5): probes are reservations; a reservation
 *   reaching a free slot asks the scheduler for a task (one round trip, the slot held idle), gets
 *   the job's next unlaunched task or a no-op. With proactive cancellation (§3.6) the scheduler
 *   cancels outstanding reservations once every task is launched.
 *
 * Tasks with data constraints (W2 stage 1) probe only their replicas (§4.1, per-task constraints).
 * Accounting for tests: probes = launched + no-ops + cancelled, once every job is done.
 */
import type { Rng } from '../../util/rng.ts';
import { NETWORK } from '../constants.ts';
import type { SimJob, SimTask, World } from '../world.ts';
import { freeRuOn, type Policy } from './types.ts';

export type SparrowMode = 'random' | 'per-task' | 'batch' | 'batch-lb';

export interface SparrowOptions {
  mode: SparrowMode;
  /** Probe ratio d (§7.9: 2). */
  d?: number;
  cancel?: boolean;
  oneWayMs?: number;
}

interface Req {
  tasks: SimTask[];
  next: number;
  /** The job's reservations, in the order they were sent. */
  probes: Probe[];
  /** Reservations whose request the scheduler has not answered yet (`answered` false). */
  open: number;
}

class Probe {
  state: 'queued' | 'requesting' | 'done' = 'queued';
  /** The scheduler has answered its request (a task or a no-op). */
  answered = false;
  /** The task the answer carries back to the worker (undefined: a no-op), until it is launched. */
  task: SimTask | undefined = undefined;
  constructor(
    /** The job's request; dropped once the probe is cancelled, so a queued no-op keeps no job alive. */
    public req: Req | undefined,
    readonly server: number,
  ) {}
}

/** A worker queue holds tasks (placed directly) and reservations (late binding). */
type Entry = SimTask | Probe;
/** What a consumed queue slot holds until the queue is compacted. */
const CONSUMED: Entry = new Probe(undefined, -1);

export class WorkerQueues {
  readonly queues: Entry[][];
  readonly heads: number[];
  readonly requesting: Int32Array;
  constructor(
    private readonly world: World,
    private readonly resolve: (p: Probe, server: number) => void,
  ) {
    this.queues = world.servers.map(() => []);
    this.heads = world.servers.map(() => 0);
    this.requesting = new Int32Array(world.servers.length);
  }
  /** Running + queued + requesting: what a probe reports (§3.2). */
  load(s: number): number {
    const srv = this.world.servers[s];
    if (!srv) return Infinity;
    const q = (this.queues[s] as Entry[]).length - (this.heads[s] as number);
    return srv.rus - srv.free + q + (this.requesting[s] as number);
  }
  enqueue(s: number, e: Entry): void {
    (this.queues[s] as Entry[]).push(e);
    this.dispatch(s);
  }
  /** Fills free slots of worker s from its queue. */
  dispatch(s: number): void {
    const srv = this.world.servers[s];
    if (!srv) return;
    const q = this.queues[s] as Entry[];
    while (srv.free - (this.requesting[s] as number) > 0 && (this.heads[s] as number) < q.length) {
      const h = this.heads[s] as number;
      const e = q[h] as Entry;
      // The consumed prefix keeps no job alive until the queue is compacted.
      q[h] = CONSUMED;
      this.heads[s] = h + 1;
      if (!(e instanceof Probe)) {
        this.world.startTask(e, freeRuOn(this.world, s));
      } else if (e.state === 'queued') {
        e.state = 'requesting';
        this.requesting[s] = (this.requesting[s] as number) + 1;
        this.resolve(e, s);
      }
    }
    // Compact the consumed prefix now and then so queues do not grow without bound.
    const h = this.heads[s] as number;
    if (h > 64 && h * 2 > q.length) {
      q.splice(0, h);
      this.heads[s] = 0;
    }
  }
  /** A probe's request finished (task launched on the held slot, or a no-op). */
  release(s: number): void {
    this.requesting[s] = (this.requesting[s] as number) - 1;
  }
}

export class SparrowPolicy implements Policy {
  readonly name: string;
  private readonly world: World;
  private readonly rng: Rng;
  private readonly mode: SparrowMode;
  private readonly d: number;
  private readonly cancel: boolean;
  private readonly oneWay: number;
  readonly workers: WorkerQueues;
  /** Workers not entirely held by resident load: a probe elsewhere would wait forever. */
  private readonly usable: number[];
  private readonly usableSet: Set<number>;
  /** sample(): which indices the current call has drawn (stamped with its number). */
  private stamp: Float64Array;
  private stampNo = 0;
  /** The engine's lane for messages one network hop away (-1 with no delay). */
  private readonly lane: number;
  readonly c = { probes: 0, launched: 0, noops: 0, cancelled: 0, cancelRpcs: 0, tasks: 0 };

  constructor(world: World, rng: Rng, opts: SparrowOptions) {
    this.world = world;
    this.rng = rng;
    this.mode = opts.mode;
    this.d = opts.d ?? 2;
    this.cancel = opts.cancel ?? true;
    this.oneWay = opts.oneWayMs ?? NETWORK.ONE_WAY_MS;
    this.name = opts.mode === 'batch-lb' ? 'sparrow' : opts.mode === 'random' ? 'random' : `sparrow-${opts.mode}`;
    this.workers = new WorkerQueues(world, (p) => this.onRequest(p));
    this.lane = this.oneWay > 0 ? world.engine.lane(this.oneWay) : -1;
    this.usable = world.servers.filter((s) => s.free > 0).map((s) => s.idx);
    this.usableSet = new Set(this.usable);
    this.stamp = new Float64Array(world.servers.length);
    world.onFree = (ru) => this.workers.dispatch(world.ruServer[ru] as number);
  }

  counters(): Record<string, number> {
    return { ...this.c };
  }

  /** k distinct servers, uniformly, from `pool` (all servers when undefined). */
  private sample(k: number, given?: readonly number[]): number[] {
    const all = this.usable.length === this.world.servers.length ? undefined : this.usable;
    // Replicas all held by residents: the task must read remotely, from any usable worker.
    const kept = given?.filter((s) => this.usableSet.has(s));
    const pool = kept && kept.length > 0 ? kept : all;
    const n = pool ? pool.length : this.world.servers.length;
    if (k >= n) {
      // More probes than workers: every worker, then the rest with replacement.
      const all = pool ? [...pool] : Array.from({ length: n }, (_, i) => i);
      while (all.length < k) all.push(pool ? (pool[this.rng.int(n)] as number) : this.rng.int(n));
      return all;
    }
    // k distinct draws in the order first drawn; a stamp per index marks this call's draws.
    if (this.stamp.length < n) this.stamp = new Float64Array(n);
    const stamp = this.stamp;
    const mark = ++this.stampNo;
    const out: number[] = [];
    while (out.length < k) {
      const i = this.rng.int(n);
      if (stamp[i] === mark) continue;
      stamp[i] = mark;
      out.push(pool ? (pool[i] as number) : i);
    }
    return out;
  }

  submit(job: SimJob): void {
    const eng = this.world.engine;
    this.c.tasks += job.tasks.length;
    const free: SimTask[] = [];
    const groups: { tasks: SimTask[]; pool?: number[] }[] = [];
    for (const t of job.tasks) {
      if (t.data) groups.push({ tasks: [t], pool: t.data });
      else free.push(t);
    }
    if (free.length > 0) groups.push({ tasks: free });
    for (const g of groups) {
      const m = g.tasks.length;
      if (this.mode === 'random') {
        const to = g.tasks.map(() => this.sample(1, g.pool)[0] as number);
        eng.after(this.oneWay, () => g.tasks.forEach((t, i) => this.workers.enqueue(to[i] as number, t)));
      } else if (this.mode === 'per-task') {
        for (const t of g.tasks) {
          const probed = this.sample(this.d, g.pool);
          this.c.probes += probed.length;
          eng.after(this.oneWay, () => {
            // Loads read at the workers, half a round trip before the scheduler decides.
            const loads = probed.map((s) => this.workers.load(s));
            eng.after(this.oneWay, () => {
              let best = 0;
              for (let i = 1; i < probed.length; i++) if ((loads[i] as number) < (loads[best] as number)) best = i;
              const s = probed[best] as number;
              eng.after(this.oneWay, () => this.workers.enqueue(s, t));
            });
          });
        }
      } else if (this.mode === 'batch') {
        const probed = this.sample(this.d * m, g.pool);
        this.c.probes += probed.length;
        eng.after(this.oneWay, () => {
          const loads = probed.map((s) => this.workers.load(s));
          eng.after(this.oneWay, () => {
            const order = probed.map((s, i) => ({ s, l: loads[i] as number })).sort((a, b) => a.l - b.l);
            g.tasks.forEach((t, i) => {
              const s = (order[i % order.length] as { s: number }).s;
              eng.after(this.oneWay, () => this.workers.enqueue(s, t));
            });
          });
        });
      } else {
        const req: Req = { tasks: g.tasks, next: 0, probes: [], open: 0 };
        const probed = this.sample(this.d * m, g.pool);
        // Constrained tasks with fewer replicas than d·m still need m reservations.
        while (probed.length < m) probed.push(probed[probed.length % Math.max(1, probed.length)] ?? 0);
        const probes = req.probes;
        for (const s of probed) probes.push(new Probe(req, s));
        req.open = probes.length;
        this.c.probes += probes.length;
        // Every probe reaches its worker at the same moment: one event enqueues them all, in the
        // order that one event per probe would have (consecutive, nothing else in between).
        this.hop(this.deliverFn, probes);
      }
    }
  }

  /** A message one network hop away: fn(arg) after the one-way delay. */
  private hop<A>(fn: (arg: A) => void, arg: A): void {
    if (this.lane >= 0) this.world.engine.afterLane(this.lane, fn, arg);
    else this.world.engine.afterArg(this.oneWay, fn, arg);
  }

  /** Late binding: a reservation reached a free slot and asks for a task (one round trip). */
  private onRequest(p: Probe): void {
    this.hop(this.answerFn, p);
  }

  // The messages of batch sampling with late binding, made once: their events carry the probe (the
  // worker is the probe's own) or the job's probes, so a request allocates nothing.
  private readonly deliverFn = (probes: Probe[]): void => {
    for (const p of probes) this.workers.enqueue(p.server, p);
  };
  private readonly answerFn = (p: Probe): void => this.answer(p);
  private readonly launchFn = (p: Probe): void => this.launch(p);
  private readonly cancelFn = (targets: Probe[]): void => {
    for (const o of targets) {
      if (o.state === 'queued') {
        o.state = 'done';
        o.req = undefined;
        this.c.cancelled++;
      }
    }
  };

  /** The request reached the scheduler: the job's next unlaunched task, or a no-op. */
  private answer(p: Probe): void {
    const req = p.req as Req; // only a queued probe is cancelled (and loses its request)
    const task = req.next < req.tasks.length ? req.tasks[req.next++] : undefined;
    p.answered = true;
    req.open--;
    if (task && req.next === req.tasks.length && this.cancel && req.open > 0) {
      // Proactive cancellation of every other outstanding reservation: the cancel RPCs arrive
      // together, so one event handles them all (the same order as one event each).
      const targets = req.probes.filter((o) => !o.answered);
      this.c.cancelRpcs += targets.length;
      this.hop(this.cancelFn, targets);
    }
    p.task = task;
    this.hop(this.launchFn, p);
  }

  /** The answer reached the worker: the held slot runs the task, or is let go. */
  private launch(p: Probe): void {
    const s = p.server;
    const task = p.task;
    p.task = undefined;
    p.state = 'done';
    this.workers.release(s);
    if (task) {
      this.c.launched++;
      this.world.startTask(task, freeRuOn(this.world, s));
    } else {
      this.c.noops++;
    }
    this.workers.dispatch(s);
  }
}

/**
 * Sparrow's omniscient baseline (footnote 2): complete, instant knowledge of idle slots; tasks go
 * to idle workers if any, otherwise wait in one FIFO queue.
 */
export class OmniscientPolicy implements Policy {
  readonly name = 'omniscient';
  private readonly queue: SimTask[] = [];
  private head = 0;
  constructor(
    private readonly world: World,
    private readonly rng: Rng,
  ) {
    world.onFree = (ru) => {
      const t = this.queue[this.head];
      if (!t) return;
      this.head++;
      world.startTask(t, ru);
    };
  }
  counters(): Record<string, number> {
    return {};
  }
  submit(job: SimJob): void {
    for (const t of job.tasks) {
      const free = this.world.free;
      if (this.head >= this.queue.length && free.size > 0) this.world.startTask(t, free.at(this.rng.int(free.size)));
      else this.queue.push(t);
    }
    if (this.head > 4096 && this.head * 2 > this.queue.length) {
      this.queue.splice(0, this.head);
      this.head = 0;
    }
  }
}
