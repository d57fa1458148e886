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
  /** The job's reservations (probe ids), in the order they were sent. */
  probes: number[];
  /** Reservations whose request the scheduler has not answered yet. */
  open: number;
}

/** A probe's state: in a worker queue, its request in flight or being answered, launched or cancelled. */
const QUEUED = 0;
const REQUESTING = 1;
const DONE = 2;

/**
 * The worker queues and the entries they hold, as numbers: an entry (a task placed directly, or a
 * reservation under late binding) is an id into typed per-entry arrays, reused once the entry is
 * finished with, and each worker's queue is a FIFO linked through the entries (`next`). No object
 * per probe and no array per worker: what a run allocates per task is the task itself.
 */
export class WorkerQueues {
  /** Per worker: first and last entry of its queue (-1: empty), entries in it, reservations requesting. */
  private readonly qHead: Int32Array;
  private readonly qTail: Int32Array;
  private readonly qLen: Int32Array;
  readonly requesting: Int32Array;
  /** Per entry: the next in its queue, its worker, whether it is a probe, the probe's state and whether it was answered. */
  private eNext = new Int32Array(1024);
  private eServer = new Int32Array(1024);
  private eProbe = new Uint8Array(1024);
  private pState = new Uint8Array(1024);
  private pAnswered = new Uint8Array(1024);
  /** The task an entry places (a direct entry), or the task a probe's answer carries back (undefined: a no-op). */
  private eTask: (SimTask | undefined)[] = new Array<undefined>(1024).fill(undefined);
  /** A probe's job request; dropped once the probe is cancelled, so a queued no-op keeps no job alive. */
  private pReq: (Req | undefined)[] = new Array<undefined>(1024).fill(undefined);
  private freeIds = new Int32Array(1024);
  private nFree = 0;
  private ids = 0;
  constructor(
    private readonly world: World,
    private readonly resolve: (probe: number, server: number) => void,
  ) {
    const n = world.servers.length;
    this.qHead = new Int32Array(n).fill(-1);
    this.qTail = new Int32Array(n).fill(-1);
    this.qLen = new Int32Array(n);
    this.requesting = new Int32Array(n);
  }
  /** Running + queued + requesting: what a probe reports (§3.2). */
  load(s: number): number {
    const srv = this.world.servers[s];
    if (!srv) return Infinity;
    return srv.rus - srv.free + (this.qLen[s] as number) + (this.requesting[s] as number);
  }
  private take(): number {
    if (this.nFree > 0) return this.freeIds[--this.nFree] as number;
    const id = this.ids++;
    if (id === this.eNext.length) this.grow();
    return id;
  }
  private grow(): void {
    const cap = this.eNext.length * 2;
    const i32 = (a: Int32Array<ArrayBuffer>): Int32Array<ArrayBuffer> => {
      const b = new Int32Array(cap);
      b.set(a);
      return b;
    };
    const u8 = (a: Uint8Array<ArrayBuffer>): Uint8Array<ArrayBuffer> => {
      const b = new Uint8Array(cap);
      b.set(a);
      return b;
    };
    this.eNext = i32(this.eNext);
    this.eServer = i32(this.eServer);
    this.freeIds = i32(this.freeIds);
    this.eProbe = u8(this.eProbe);
    this.pState = u8(this.pState);
    this.pAnswered = u8(this.pAnswered);
    for (let i = this.eTask.length; i < cap; i++) {
      this.eTask.push(undefined);
      this.pReq.push(undefined);
    }
  }
  /** Lets an entry's id go (its task and request with it). */
  drop(id: number): void {
    this.eTask[id] = undefined;
    this.pReq[id] = undefined;
    this.freeIds[this.nFree++] = id;
  }
  /** A new reservation of `req` for worker s (not yet in its queue). */
  probe(req: Req, s: number): number {
    const id = this.take();
    this.eServer[id] = s;
    this.eProbe[id] = 1;
    this.pState[id] = QUEUED;
    this.pAnswered[id] = 0;
    this.pReq[id] = req;
    return id;
  }
  server(id: number): number {
    return this.eServer[id] as number;
  }
  req(id: number): Req | undefined {
    return this.pReq[id];
  }
  /** The probe's request was answered: with a task, or a no-op (undefined). */
  answer(id: number, task: SimTask | undefined): void {
    this.pAnswered[id] = 1;
    this.eTask[id] = task;
  }
  /** An outstanding reservation of `req`: neither answered nor let go. */
  outstanding(id: number, req: Req): boolean {
    return this.pReq[id] === req && this.pAnswered[id] === 0;
  }
  /** Cancels a reservation of `req` still queued; false if it is not (any more). */
  cancel(id: number, req: Req): boolean {
    if (this.pReq[id] !== req || this.pState[id] !== QUEUED) return false;
    this.pState[id] = DONE;
    this.pReq[id] = undefined;
    return true;
  }
  /** The task a launched probe runs (undefined: a no-op); the probe is done and its id let go. */
  launch(id: number): SimTask | undefined {
    const task = this.eTask[id];
    this.pState[id] = DONE;
    this.drop(id);
    return task;
  }
  /** Places a task directly in worker s's queue. */
  enqueueTask(s: number, t: SimTask): void {
    const id = this.take();
    this.eServer[id] = s;
    this.eProbe[id] = 0;
    this.eTask[id] = t;
    this.enqueue(s, id);
  }
  /** Appends an entry to worker s's queue and fills its free slots. */
  enqueue(s: number, id: number): void {
    this.eNext[id] = -1;
    const tail = this.qTail[s] as number;
    if (tail < 0) this.qHead[s] = id;
    else this.eNext[tail] = id;
    this.qTail[s] = id;
    this.qLen[s] = (this.qLen[s] as number) + 1;
    this.dispatch(s);
  }
  /** Fills free slots of worker s from its queue. */
  dispatch(s: number): void {
    const srv = this.world.servers[s];
    if (!srv) return;
    const requesting = this.requesting;
    let id: number;
    while (srv.free - (requesting[s] as number) > 0 && (id = this.qHead[s] as number) >= 0) {
      const next = this.eNext[id] as number;
      this.qHead[s] = next;
      if (next < 0) this.qTail[s] = -1;
      this.qLen[s] = (this.qLen[s] as number) - 1;
      if (this.eProbe[id] === 0) {
        const t = this.eTask[id] as SimTask;
        this.drop(id);
        this.world.startTask(t, freeRuOn(this.world, s));
      } else if (this.pState[id] === QUEUED) {
        this.pState[id] = REQUESTING;
        requesting[s] = (requesting[s] as number) + 1;
        this.resolve(id, s);
      } else {
        // A cancelled reservation reaching the head: nothing more refers to it.
        this.drop(id);
      }
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
        eng.after(this.oneWay, () => g.tasks.forEach((t, i) => this.workers.enqueueTask(to[i] as number, t)));
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
              eng.after(this.oneWay, () => this.workers.enqueueTask(s, t));
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
              eng.after(this.oneWay, () => this.workers.enqueueTask(s, t));
            });
          });
        });
      } else {
        const req: Req = { tasks: g.tasks, next: 0, probes: [], open: 0 };
        const probed = this.sample(this.d * m, g.pool);
        // Constrained tasks with fewer replicas than d·m still need m reservations.
        while (probed.length < m) probed.push(probed[probed.length % Math.max(1, probed.length)] ?? 0);
        const probes = req.probes;
        for (const s of probed) probes.push(this.workers.probe(req, s));
        req.open = probes.length;
        this.c.probes += probes.length;
        // Every probe reaches its worker at the same moment: one event enqueues them all, in the
        // order that one event per probe would have (consecutive, nothing else in between).
        this.hop(this.deliverFn, req);
      }
    }
  }

  /** A message one network hop away: fn(arg) after the one-way delay. */
  private hop<A>(fn: (arg: A) => void, arg: A): void {
    if (this.lane >= 0) this.world.engine.afterLane(this.lane, fn, arg);
    else this.world.engine.afterArg(this.oneWay, fn, arg);
  }

  /** Late binding: a reservation reached a free slot and asks for a task (one round trip). */
  private onRequest(p: number): void {
    this.hop(this.answerFn, p);
  }

  // The messages of batch sampling with late binding, made once: their events carry the probe's id
  // (the worker is the probe's own) or the job's request, so a request allocates nothing.
  private readonly deliverFn = (req: Req): void => {
    const w = this.workers;
    for (const p of req.probes) w.enqueue(w.server(p), p);
  };
  private readonly answerFn = (p: number): void => this.answer(p);
  private readonly launchFn = (p: number): void => this.launch(p);
  private readonly cancelFn = (c: { req: Req; targets: number[] }): void => {
    for (const o of c.targets) if (this.workers.cancel(o, c.req)) this.c.cancelled++;
  };

  /** The request reached the scheduler: the job's next unlaunched task, or a no-op. */
  private answer(p: number): void {
    const w = this.workers;
    const req = w.req(p) as Req; // only a queued probe is cancelled (and loses its request)
    const task = req.next < req.tasks.length ? req.tasks[req.next++] : undefined;
    w.answer(p, task);
    req.open--;
    if (task && req.next === req.tasks.length && this.cancel && req.open > 0) {
      // Proactive cancellation of every other outstanding reservation: the cancel RPCs arrive
      // together, so one event handles them all (the same order as one event each).
      const targets = req.probes.filter((o) => w.outstanding(o, req));
      this.c.cancelRpcs += targets.length;
      this.hop(this.cancelFn, { req, targets });
    }
    this.hop(this.launchFn, p);
  }

  /** The answer reached the worker: the held slot runs the task, or is let go. */
  private launch(p: number): void {
    const w = this.workers;
    const s = w.server(p);
    const task = w.launch(p);
    w.release(s);
    if (task) {
      this.c.launched++;
      this.world.startTask(task, freeRuOn(this.world, s));
    } else {
      this.c.noops++;
    }
    w.dispatch(s);
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
