/**
 * Jobs whose tasks must all run on one server (SimJob.oneServer: a trace's pod of c cores is c
 * one-RU tasks taken together on one node) and jobs held to some platforms (SimJob.platforms), for
 * the policies that replay a trace:
 *
 * - what the tarcil and centralized policies use: whether a server may take a job's pending tasks,
 *   tarcil's sampling of servers with room for every task (`selectOneServer`: the core's required
 *   pack), and the centralized scheduler's choice of the best server with room (it sees every
 *   server);
 * - `PodQueuePolicy`: Sparrow-style probing with the constraint, and random placement, on worker
 *   queues where an entry is a whole pod (every pending task of a one-server job, or one task of
 *   another job): a worker runs the entry at the head of its FIFO queue once it has that many free
 *   RUs, so a large pod at the head holds back the smaller ones behind it.
 */
import { chooseSampleSize, placementRequestOf, type CoreConfig, type CoreContext } from '../../agent/core.ts';
import type { JobSpec } from '../../model/types.ts';
import { selectPlacements, type PlacementRequest } from '../../sampling/batch.ts';
import type { RuIndex } from '../../sampling/ru-index.ts';
import { SelectionContext, type Pick } from '../../sampling/selection.ts';
import type { JobTarget } from '../../quality/index.ts';
import type { RuScore } from '../../quality/index.ts';
import type { Rng } from '../../util/rng.ts';
import { NETWORK } from '../constants.ts';
import type { Server, SimJob, SimTask, World } from '../world.ts';
import { freeRuOn, type Policy } from './types.ts';

/** Whether the job's platform constraint allows this platform. */
export function allowsPlatform(job: SimJob, platform: string): boolean {
  return job.platforms === undefined || job.platforms.includes(platform);
}

/** Whether server s may take `need` of the job's tasks now: its platform allowed and, for a one-server job, room for them all. */
export function serverFits(job: SimJob, s: Server, need: number): boolean {
  return allowsPlatform(job, s.spec.platform) && (job.oneServer ? s.free >= need : s.free > 0);
}

/**
 * Tarcil's sampling for a one-server job of m tasks: the core's rule for a required pack
 * (sampling/one-group.ts, as the live agents place `locality: {mode: 'pack', required: true}`)
 * with the core's sample size R for the job, over the free RUs of its platforms in the agent's
 * view (not in `exclude`): all m picks on one server, or none.
 */
export function selectOneServer(
  ctx: CoreContext,
  job: JobSpec,
  target: JobTarget,
  m: number,
  cfg: CoreConfig,
  exclude: ReadonlySet<number>,
): { R: number; picks: Pick[]; candidatesSeen: number } {
  const { R } = chooseSampleSize(ctx, target, cfg);
  const req: PlacementRequest = { ...placementRequestOf(job, target, m, R, cfg), locality: { mode: 'pack', scope: 'server', required: true }, exclude };
  const sel = selectPlacements(ctx.state, req, ctx.rng);
  return { R, picks: sel.picks, candidatesSeen: sel.candidatesSeen };
}

/**
 * The centralized scheduler's choice for a one-server job: among the servers with room for all
 * `need` tasks on an allowed platform (of the share it scanned, each server kept with probability
 * `share`), the one whose free RU scores best for the job (its free RUs score alike). `state` is
 * its fresh view of the world.
 */
export function bestServerFor(
  world: World,
  state: RuIndex,
  req: PlacementRequest,
  job: SimJob,
  need: number,
  share: number,
  rng: Rng,
): { server: Server; quality: RuScore } | undefined {
  const ctx = new SelectionContext(state, req);
  let best: { server: Server; quality: RuScore; score: number } | undefined;
  for (const s of world.servers) {
    if (s.free < need || !allowsPlatform(job, s.spec.platform)) continue;
    if (share < 1 && rng.next() >= share) continue;
    const ss = state.server(s.spec.id);
    const ru = freeRuOn(world, s.idx);
    if (!ss || ru < 0) continue;
    const { score, quality } = ctx.score(ss, ru - s.base);
    if (!best || score > best.score) best = { server: s, quality, score };
  }
  return best;
}

/** Starts every task on free RUs of server s, each with the quality the scheduler saw. */
export function startAllOn(world: World, tasks: readonly SimTask[], s: Server, quality?: RuScore): void {
  for (const t of tasks) {
    const ru = freeRuOn(world, s.idx);
    if (ru < 0) throw new Error(`server ${s.spec.id} has no free RU for job ${t.job.id}`);
    if (quality) {
      t.Q = quality.Q;
      t.acceptable = quality.acceptable;
    }
    world.startTask(t, ru);
  }
}

/** One entry of a worker queue: tasks to start together on the worker. */
interface Entry {
  tasks: SimTask[];
  launched: boolean;
}

export interface PodQueueOptions {
  /** Probes per entry: 2 is Sparrow's batch sampling with late binding (d = 2), 1 is random placement. */
  d: number;
  oneWayMs?: number;
}

/**
 * Sparrow-style probing (d = 2) or random placement (d = 1) for one-server jobs, interference-blind.
 * Each entry probes d distinct workers drawn uniformly from those of an allowed platform large
 * enough to hold it; a probe joins the worker's FIFO queue one network hop later (a reservation,
 * late binding). A worker whose head entry fits in its free RUs starts it; the entry's other
 * reservations are then dropped when they reach a head (proactive cancellation is not modelled,
 * nor the request's round trip). A worker never skips its head for a smaller entry behind it.
 */
export class PodQueuePolicy implements Policy {
  readonly name: string;
  private readonly queues: Entry[][];
  private readonly eligible = new Map<string, number[]>();
  private readonly oneWay: number;
  readonly c = { probes: 0, launched: 0, dropped: 0, blockedHeads: 0 };

  constructor(
    private readonly world: World,
    private readonly rng: Rng,
    private readonly opts: PodQueueOptions,
  ) {
    this.name = opts.d === 1 ? 'random' : 'sparrow';
    this.oneWay = opts.oneWayMs ?? NETWORK.ONE_WAY_MS;
    this.queues = world.servers.map(() => []);
    world.onFree = (ru) => this.drain(world.ruServer[ru] as number);
  }

  counters(): Record<string, number> {
    return { ...this.c };
  }

  /** Workers of an allowed platform with at least `need` RUs, cached per platform set and size. */
  private workersFor(job: SimJob, need: number): number[] {
    const key = `${job.platforms?.join('|') ?? '*'}/${need}`;
    let list = this.eligible.get(key);
    if (!list) {
      list = this.world.servers.filter((s) => s.rus >= need && allowsPlatform(job, s.spec.platform)).map((s) => s.idx);
      this.eligible.set(key, list);
    }
    return list;
  }

  submit(job: SimJob): void {
    const entries: Entry[] = job.oneServer ? [{ tasks: [...job.tasks], launched: false }] : job.tasks.map((t) => ({ tasks: [t], launched: false }));
    for (const e of entries) {
      const workers = this.workersFor(job, e.tasks.length);
      if (workers.length === 0) continue;
      const chosen = new Set<number>();
      const d = Math.min(this.opts.d, workers.length);
      while (chosen.size < d) chosen.add(workers[this.rng.int(workers.length)] as number);
      for (const s of chosen) {
        this.c.probes++;
        this.world.engine.after(this.oneWay, () => {
          (this.queues[s] as Entry[]).push(e);
          this.drain(s);
        });
      }
    }
  }

  private drain(s: number): void {
    const q = this.queues[s] as Entry[];
    const srv = this.world.servers[s] as Server;
    while (q.length > 0) {
      const e = q[0] as Entry;
      if (e.launched) {
        q.shift();
        this.c.dropped++;
        continue;
      }
      if (srv.free < e.tasks.length) {
        if (q.length > 1) this.c.blockedHeads++;
        return;
      }
      q.shift();
      e.launched = true;
      this.c.launched++;
      startAllOn(this.world, e.tasks, srv);
    }
  }
}
