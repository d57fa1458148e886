/**
 * The same job stream through both drivers of the scheduling loop: the live agent on the embedded
 * store and the simulator's tarcil policy. Same servers, same seed, jobs far enough apart that
 * each driver's view has caught up with its own commits: every job takes the same steps of the
 * attempt loop (agent/attempt-steps.ts), gets the same sample sizes, the same RUs for the same
 * tasks, with the same quality, and neither driver sees a conflict. Conflicts, gangs and quotas:
 * cross-driver-steps.test.ts.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { SchedulingAgent } from '../../src/agent/agent.ts';
import { stepLine } from '../../src/agent/attempt-steps.ts';
import type { JobSpec, ServerSpec, WorkloadProfile } from '../../src/model/types.ts';
import { Engine } from '../../src/sim/engine.ts';
import { TarcilPolicy } from '../../src/sim/policies/tarcil.ts';
import { makeJob as makeSimJob, World, type SimJob } from '../../src/sim/world.ts';
import { Keys } from '../../src/state/keys.ts';
import { seedCluster } from '../../src/state/seed.ts';
import { MemoryStore } from '../../src/store/index.ts';
import { SystemClock } from '../../src/util/clock.ts';
import { createLogger } from '../../src/util/log.ts';
import { SeededRng } from '../../src/util/rng.ts';
import { makeJob, profile, TEST_PROFILES } from '../support/jobs.ts';

const closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of closers.splice(0).reverse()) await c();
});

const PLATFORMS = ['r3-2xlarge', 'c4-4xlarge', 'm4-large'];

/** 24 servers of 8 RUs on three platforms, two zones; ids sort in the order given. */
function servers(): ServerSpec[] {
  return Array.from({ length: 24 }, (_, i) => ({
    id: `s${String(i).padStart(3, '0')}`,
    platform: PLATFORMS[i % 3] as string,
    rack: `r${Math.floor(i / 6)}`,
    rus: 8,
    speed: 1,
    attributes: { zone: i < 12 ? 'a' : 'b' },
  }));
}

/** Profiles whose speed differs by platform, so quality depends on where a task lands. */
const PROFILES: WorkloadProfile[] = TEST_PROFILES.map((p, k) => profile(p.name, [...p.caused], { 'c4-4xlarge': 0.6 + 0.1 * k, 'm4-large': 0.4 + 0.05 * k }));

interface Step {
  profile: WorkloadProfile;
  tasks: number;
  priority: number;
}

/** A stream mixing sizes (one chunk and several), profiles and priorities. */
function stream(seed: number): Step[] {
  const rng = new SeededRng(seed);
  return Array.from({ length: 14 }, (_, i) => ({
    profile: PROFILES[rng.int(PROFILES.length)] as WorkloadProfile,
    tasks: i === 3 ? 50 : 1 + rng.int(9),
    priority: i % 5 === 4 ? 7 : 5,
  }));
}

interface Seen {
  R: number[];
  rus: string[];
  Q: number[];
  conflicts: number;
  steps: string[];
}

const GAP_MS = 1000;
const MAX_QUEUE_MS = 10_000;

function spec(id: string, s: Step, submittedAt: number): JobSpec {
  return makeJob(id, s.profile, s.tasks, {
    priority: s.priority,
    maxQueueMs: MAX_QUEUE_MS,
    submittedAt,
  });
}

async function live(seed: number, steps: Step[]): Promise<Seen[]> {
  const traced = new Map<string, string[]>();
  const store = new MemoryStore();
  const keys = new Keys('/x/');
  await seedCluster(store, keys, servers());
  const agent = new SchedulingAgent({
    id: 'a0',
    store,
    keys,
    clock: new SystemClock(),
    rng: new SeededRng(seed).fork(),
    log: createLogger('test'),
    onStep: (job, s) => traced.set(job, [...(traced.get(job) ?? []), stepLine(s)]),
  });
  await agent.start();
  closers.push(async () => {
    await agent.close();
    await store.close();
  });
  const out: Seen[] = [];
  for (const [i, s] of steps.entries()) {
    const rec = await agent.submit(spec(`j${i}`, s, i * GAP_MS));
    const byTask = [...rec.placements].sort((a, b) => a.task - b.task);
    out.push({
      R: rec.samples.map((x) => x.R),
      rus: byTask.map((p) => `${p.ru.server}/${p.ru.index}`),
      Q: byTask.map((p) => p.Q),
      conflicts: rec.conflicts,
      steps: traced.get(`j${i}`) ?? [],
    });
  }
  return out;
}

function simulated(seed: number, steps: Step[]): { seen: Seen[]; counters: Record<string, number> } {
  const engine = new Engine();
  const world = new World(engine, new SeededRng(seed + 1), servers(), { interference: true, utilEvery: 0 });
  const traced = new Map<string, string[]>();
  const policy = new TarcilPolicy(world, new SeededRng(seed), {
    agents: 1,
    maxQueueMs: MAX_QUEUE_MS,
    onStep: (job, s) => traced.set(job, [...(traced.get(job) ?? []), stepLine(s)]),
  });
  const jobs: SimJob[] = steps.map((s, i) =>
    makeSimJob({ id: i, profile: s.profile, arrival: i * GAP_MS, work: Array.from({ length: s.tasks }, () => 1e9), priority: s.priority, maxPerf: 1 }),
  );
  for (const job of jobs) engine.at(job.arrival, () => policy.submit(job));
  engine.run(steps.length * GAP_MS + 5000);
  const seen = jobs.map((job) => {
    const rus = job.tasks.map((t) => {
      const srv = world.server(t.ru);
      return `${srv.spec.id}/${t.ru - srv.base}`;
    });
    return {
      R: [] as number[],
      rus,
      Q: job.tasks.map((t) => t.Q ?? NaN),
      conflicts: job.conflicts,
      Rsum: job.Rsum,
      Rn: job.Rn,
      steps: traced.get(String(job.id)) ?? [],
    };
  });
  return {
    seen: seen.map(({ R, rus, Q, conflicts, Rsum, Rn, steps }) => ({ R: Rn > 0 ? [Rsum / Rn] : R, rus, Q, conflicts, steps })),
    counters: policy.counters(),
  };
}

const mean = (xs: number[]): number => xs.reduce((a, b) => a + b, 0) / xs.length;

describe('one scheduling loop, two drivers', () => {
  for (const seed of [11, 12, 13]) {
    it(`places the same stream on the same RUs with the same R and Q, live and simulated (seed ${seed})`, async () => {
      const steps = stream(seed);
      const sim = simulated(seed, steps);
      const got = await live(seed, steps);
      expect(got).toHaveLength(steps.length);
      for (const [i, l] of got.entries()) {
        const s = sim.seen[i] as Seen;
        expect(l.steps.length, `job ${i}: steps traced`).toBeGreaterThan(0);
        expect(l.steps, `job ${i}: steps`).toEqual(s.steps);
        expect(l.rus, `job ${i}: RUs`).toEqual(s.rus);
        expect(mean(l.R), `job ${i}: R`).toBeCloseTo(s.R[0] as number, 9);
        expect(
          l.Q.map((q) => q.toFixed(9)),
          `job ${i}: Q`,
        ).toEqual(s.Q.map((q) => q.toFixed(9)));
        expect(l.conflicts).toBe(0);
        expect(s.conflicts).toBe(0);
      }
      // The 50-task job took two transactions in both (42 picks per transaction).
      expect(got[3]?.R).toHaveLength(2);
      expect(sim.counters.commits).toBe(steps.length + 1);
      expect(sim.counters.readmissions).toBe(0);
    });
  }
});
