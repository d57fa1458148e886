/**
 * The step sequence of the attempt loop (agent/attempt-steps.ts) taken by both of its drivers, the
 * live agent on the embedded store and the simulator's tarcil policy, recorded step by step for
 * every job and compared: gangs (one transaction and several: reserve chunk by chunk, then
 * confirm), a namespace quota (refused, waits with the quota's reason, places once RUs are given
 * back), and agents racing for few RUs (conflicts), at three seeds. Where timing legitimately
 * changes the trace (how often a conflict or a recheck comes round), what must hold in both is
 * asserted instead: the same steps once the repeats are folded, a conflict retried on the same
 * chunk with only its conflicting picks resampled, every job placed whole, no gang half-placed.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { SchedulingAgent } from '../../src/agent/agent.ts';
import { stepLine, type Outcome, type Step } from '../../src/agent/attempt-steps.ts';
import type { JobSpec, ServerSpec, WorkloadProfile } from '../../src/model/types.ts';
import { Engine } from '../../src/sim/engine.ts';
import { TarcilPolicy } from '../../src/sim/policies/tarcil.ts';
import { makeJob as makeSimJob, World, type SimJob } from '../../src/sim/world.ts';
import { Keys } from '../../src/state/keys.ts';
import { seedCluster } from '../../src/state/seed.ts';
import { MemoryStore } from '../../src/store/index.ts';
import { putNamespace } from '../../src/tenancy/namespaces.ts';
import { SystemClock } from '../../src/util/clock.ts';
import { createLogger } from '../../src/util/log.ts';
import { SeededRng } from '../../src/util/rng.ts';
import { makeJob, profile, TEST_PROFILES } from '../support/jobs.ts';

const closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of closers.splice(0).reverse()) await c();
});

const PLATFORMS = ['r3-2xlarge', 'c4-4xlarge', 'm4-large'];
const PROFILES: WorkloadProfile[] = TEST_PROFILES.map((p, k) => profile(p.name, [...p.caused], { 'c4-4xlarge': 0.6 + 0.1 * k, 'm4-large': 0.4 + 0.05 * k }));
const MAX_QUEUE_MS = 10_000;
const RECHECK_MS = 40;

function servers(n: number, rus: number): ServerSpec[] {
  return Array.from({ length: n }, (_, i) => ({
    id: `s${String(i).padStart(3, '0')}`,
    platform: PLATFORMS[i % 3] as string,
    rack: `r${Math.floor(i / 6)}`,
    rus,
    speed: 1,
    attributes: {},
  }));
}

/** One job of a scenario: its namespace (none: default), tasks, whether a gang, when it arrives. */
interface JobPlan {
  ns?: string;
  tasks: number;
  gang?: boolean;
  at: number;
  profile: WorkloadProfile;
  /** Simulated run time of each task (ms). */
  workMs?: number;
}

/** A step as traced, with the outcome that led to it. */
interface Traced {
  line: string;
  step: Step;
  after: Outcome | undefined;
}

interface Run {
  traces: Traced[][];
  placed: number[];
}

const liveId = (p: JobPlan, i: number): string => (p.ns ? `${p.ns}/j${i}` : `j${i}`);
const simId = (p: JobPlan, i: number): string => (p.ns ? `${p.ns}/${i}` : String(i));

function specOf(p: JobPlan, i: number): JobSpec {
  return makeJob(liveId(p, i), p.profile, p.tasks, { maxQueueMs: MAX_QUEUE_MS, submittedAt: p.at, mode: p.gang ? 'gang' : 'incremental' });
}

function tracer(
  plans: JobPlan[],
  idOf: (p: JobPlan, i: number) => string,
): { traces: Traced[][]; onStep: (job: string, s: Step, after: Outcome | undefined) => void } {
  const index = new Map(plans.map((p, i) => [idOf(p, i), i]));
  const traces: Traced[][] = plans.map(() => []);
  return {
    traces,
    onStep: (job, s, after) => {
      const i = index.get(job);
      if (i !== undefined) traces[i]?.push({ line: stepLine(s), step: s, after });
    },
  };
}

interface LiveOpts {
  agents: number;
  cell: ServerSpec[];
  quotas?: Record<string, number>;
  /** Submit all at once (racing), else one after another. */
  together: boolean;
  /** Called while a job waits at its quota: gives the namespace's RUs back. */
  onQuotaWait?: (ctx: { store: MemoryStore; keys: Keys; placed: Map<string, { server: string; index: number }[]> }) => Promise<void>;
}

async function live(seed: number, plans: JobPlan[], o: LiveOpts): Promise<Run> {
  const store = new MemoryStore();
  const keys = new Keys('/x/');
  await seedCluster(store, keys, o.cell);
  for (const [ns, maxRus] of Object.entries(o.quotas ?? {})) await putNamespace(store, keys, ns, { maxRus }, Date.now());
  const t = tracer(plans, liveId);
  let quotaSeen: (() => void) | undefined;
  const quotaWait = new Promise<void>((resolve) => (quotaSeen = resolve));
  const agents = Array.from(
    { length: o.agents },
    (_, k) =>
      new SchedulingAgent({
        id: `a${k}`,
        store,
        keys,
        clock: new SystemClock(),
        rng: new SeededRng(seed + 100 * k).fork(),
        log: createLogger('test', 'silent'),
        config: { recheckMs: RECHECK_MS },
        onStep: (job, s, after) => {
          t.onStep(job, s, after);
          if (s.kind === 'wait' && s.for === 'quota') quotaSeen?.();
        },
      }),
  );
  for (const a of agents) await a.start();
  closers.push(async () => {
    for (const a of agents) await a.close();
    await store.close();
  });
  const placed = new Map<string, { server: string; index: number }[]>();
  const submit = async (p: JobPlan, i: number): Promise<number> => {
    const rec = await (agents[i % agents.length] as SchedulingAgent).submit(specOf(p, i));
    placed.set(
      liveId(p, i),
      rec.placements.map((x) => x.ru),
    );
    return rec.placements.length;
  };
  let counts: number[];
  if (o.together) counts = await Promise.all(plans.map(submit));
  else {
    counts = [];
    for (const [i, p] of plans.entries()) {
      if (o.onQuotaWait && i === plans.length - 1) {
        const last = submit(p, i);
        await quotaWait;
        await o.onQuotaWait({ store, keys, placed });
        counts.push(await last);
      } else counts.push(await submit(p, i));
    }
  }
  return { traces: t.traces, placed: counts };
}

function simulated(seed: number, plans: JobPlan[], o: { agents: number; cell: ServerSpec[]; quotas?: Record<string, number> }): Run {
  const engine = new Engine();
  const world = new World(engine, new SeededRng(seed + 1), o.cell, { interference: true, utilEvery: 0 });
  const t = tracer(plans, simId);
  const policy = new TarcilPolicy(world, new SeededRng(seed), {
    agents: o.agents,
    maxQueueMs: MAX_QUEUE_MS,
    attempt: { recheckMs: RECHECK_MS },
    onStep: t.onStep,
    ...(o.quotas ? { quotas: o.quotas } : {}),
  });
  const jobs: SimJob[] = plans.map((p, i) =>
    makeSimJob({
      id: i,
      profile: p.profile,
      arrival: p.at,
      work: Array.from({ length: p.tasks }, () => p.workMs ?? 1e9),
      maxPerf: 1,
      ...(p.ns ? { namespace: p.ns } : {}),
      ...(p.gang ? { gang: true } : {}),
    }),
  );
  for (const job of jobs) engine.at(job.arrival, () => policy.submit(job));
  engine.run(60_000);
  return { traces: t.traces, placed: jobs.map((j) => j.tasks.filter((x) => x.state !== 'pending').length) };
}

const lines = (t: Traced[]): string[] => t.map((x) => x.line);

/**
 * A trace with its repeats folded: a fair-share check skipped after a wake (timing), and each
 * run of identical wait-and-retry cycles kept once.
 */
function folded(t: Traced[]): string[] {
  const out: string[] = [];
  for (const l of lines(t)) {
    if (l.startsWith('fair ')) continue;
    out.push(l);
    // Fold a cycle that repeats the one before it (same lines, ending at the same wait).
    for (let n = 1; n <= out.length / 2; n++) {
      const a = out.slice(out.length - 2 * n, out.length - n).join('|');
      const b = out.slice(out.length - n).join('|');
      if (a === b) {
        out.splice(out.length - n, n);
        break;
      }
    }
  }
  return out;
}

/** What must hold of any trace, in either driver: the steps in an order the attempt loop allows. */
function checkTrace(t: Traced[], tasks: number, what: string): void {
  expect(t.length, `${what}: no steps traced (the driver bypassed the step sequence)`).toBeGreaterThan(0);
  expect(t.at(-1)?.line, what).toBe('done');
  for (const [k, x] of t.entries()) {
    const prev = t[k - 1];
    if (x.step.kind === 'commit') expect(prev?.step.kind, `${what}: a commit follows a decision`).toBe('decide');
    if (x.step.kind === 'confirm') expect(x.step.tasks, `${what}: a gang confirms all its tasks`).toBe(tasks);
    // A conflict within the chunk is retried on the same chunk, its kept picks not resampled.
    const out = x.after;
    if (out?.kind === 'committed' && out.conflicts > 0 && x.step.kind === 'wait' && x.step.retry) {
      const next = t[k + 1];
      expect(next?.step.kind, `${what}: a retry decides again`).toBe('decide');
      if (next?.step.kind === 'decide' && prev?.step.kind === 'commit') {
        expect(next.step.fresh, `${what}: the same chunk`).toBe(false);
        const decided = t[k + 2]?.after;
        if (decided?.kind === 'decided' && !next.step.reserve) {
          // Resampled: the conflicting picks, and any kept pick a rival took meanwhile.
          expect(decided.kept, `${what}: kept picks`).toBeLessThanOrEqual(out.kept ?? 0);
          expect(next.step.chunk - (out.kept ?? 0), `${what}: only the conflicting picks are resampled`).toBe(out.conflicts);
        }
      }
    }
  }
}

/**
 * What a race must leave in either driver: every job's steps in an allowed order and placed whole,
 * a gang never placed in part, and a commit that conflicts placing none of its picks (one
 * transaction: those the store found unchanged are kept for the next). Returns how many
 * conflicting commits kept picks.
 */
function checkRace(run: Run, plans: JobPlan[], name: string): number {
  let kept = 0;
  for (const [i, p] of plans.entries()) {
    checkTrace(run.traces[i] ?? [], p.tasks, `${name} job ${i}`);
    expect(run.placed[i], `${name} job ${i}: placed whole`).toBe(p.tasks);
    for (const x of run.traces[i] ?? []) {
      if (x.after?.kind !== 'committed') continue;
      if (p.gang) expect([0, p.tasks]).toContain(x.after.placed);
      if (x.after.conflicts === 0) continue;
      expect(x.after.placed, `${name} job ${i}: a partly conflicting commit`).toBe(0);
      if ((x.after.kept ?? 0) > 0) kept++;
    }
  }
  return kept;
}

describe('one step sequence, two drivers', () => {
  for (const seed of [21, 22, 23]) {
    it(`gangs take the same steps live and simulated: one transaction, and reserved chunk by chunk then confirmed (seed ${seed})`, async () => {
      const rng = new SeededRng(seed);
      const pick = (): WorkloadProfile => PROFILES[rng.int(PROFILES.length)] as WorkloadProfile;
      const plans: JobPlan[] = [
        { tasks: 50, gang: true, at: 0, profile: pick() },
        { tasks: 3 + rng.int(6), gang: true, at: 1000, profile: pick() },
        { tasks: 45, at: 2000, profile: pick() },
        { tasks: 90, gang: true, at: 3000, profile: pick() },
      ];
      const cell = servers(24, 8);
      const sim = simulated(seed, plans, { agents: 1, cell });
      const got = await live(seed, plans, { agents: 1, cell, together: false });
      for (const [i, p] of plans.entries()) {
        expect(lines(got.traces[i] ?? []), `job ${i}: steps`).toEqual(lines(sim.traces[i] ?? []));
        checkTrace(got.traces[i] ?? [], p.tasks, `live job ${i}`);
        checkTrace(sim.traces[i] ?? [], p.tasks, `sim job ${i}`);
        expect(got.placed[i], `live job ${i}: placed`).toBe(p.tasks);
        expect(sim.placed[i], `sim job ${i}: placed`).toBe(p.tasks);
      }
      // The gangs past one transaction (42 picks) reserved chunk by chunk, then confirmed.
      expect(lines(sim.traces[0] ?? []).filter((l) => l.startsWith('reserve '))).toEqual(['reserve 42/42', 'reserve 8/8']);
      expect(lines(sim.traces[3] ?? [])).toContain('confirm 90');
    });

    it(`a job over its namespace's quota waits with the quota's reason and places once RUs are given back, live and simulated (seed ${seed})`, async () => {
      const rng = new SeededRng(seed);
      const prof = PROFILES[rng.int(PROFILES.length)] as WorkloadProfile;
      const holder = 2 + rng.int(2);
      const plans: JobPlan[] = [
        { ns: 'q', tasks: holder, at: 0, profile: prof, workMs: 300 },
        { ns: 'q', tasks: 1, at: 100, profile: prof },
      ];
      const cell = servers(6, 4);
      const quotas = { q: holder };
      const sim = simulated(seed, plans, { agents: 1, cell, quotas });
      const got = await live(seed, plans, {
        agents: 1,
        cell,
        quotas,
        together: false,
        // The holder's tasks end: their RUs are freed and its allotment given back (as its owner would).
        onQuotaWait: async ({ store, keys, placed }) => {
          for (const ru of placed.get(liveId(plans[0] as JobPlan, 0)) ?? []) await store.put(keys.ru(ru), JSON.stringify({ state: 'free' }));
          await store.put(keys.usage('q'), JSON.stringify({ total: 0, jobs: {} }));
        },
      });
      const why = `namespace q is at its quota: ${holder} of ${holder} RUs in use`;
      for (const run of [got, sim]) {
        const waiter = run.traces[1] ?? [];
        const waits = waiter.map((x) => x.step).filter((s) => s.kind === 'wait');
        expect(waits.length).toBeGreaterThan(0);
        for (const w of waits) expect(w).toMatchObject({ for: 'quota', why, readmitted: true });
        // Refused in advance by the quota, through afterQuota: no conflict, no RU taken.
        expect(waiter.some((x) => x.after?.kind === 'committed' && x.after.quota !== undefined && x.after.conflicts === 0)).toBe(true);
        expect(run.placed).toEqual([holder, 1]);
      }
      expect(folded(got.traces[1] ?? [])).toEqual(folded(sim.traces[1] ?? []));
      expect(folded(got.traces[1] ?? [])).toEqual(['admit 1', 'decide 1', 'commit 1/1', 'wait quota readmitted', 'admit 1', 'decide 1', 'commit 1/1', 'done']);
      expect(lines(got.traces[0] ?? [])).toEqual(lines(sim.traces[0] ?? []));
    });

    it(`agents racing for few RUs retry only what conflicted, and every job is placed whole, live and simulated (seed ${seed})`, async () => {
      const rng = new SeededRng(seed);
      // 12 RUs, 11 tasks in 7 jobs (two gangs) arriving together at three agents.
      const sizes = [3, 2, 1, 2, 1, 1, 1];
      const plans: JobPlan[] = sizes.map((tasks, i) => ({
        tasks,
        gang: i === 1 || i === 3,
        at: i * 0.01,
        profile: PROFILES[rng.int(PROFILES.length)] as WorkloadProfile,
      }));
      const cell = servers(3, 4);
      const sim = simulated(seed, plans, { agents: 3, cell });
      const got = await live(seed, plans, { agents: 3, cell, together: true });
      checkRace(got, plans, 'live');
      checkRace(sim, plans, 'sim');
      // With the retries and waits folded (a retried commit is one commit), each job took the
      // same steps in both drivers.
      const base = (t: Traced[]): string[] =>
        folded(t)
          .filter((l) => !l.startsWith('wait') && !l.endsWith(' again'))
          .map((l) => (l.startsWith('commit ') ? 'commit' : l))
          .filter((l, k, all) => l !== all[k - 1]);
      for (const i of plans.keys()) expect(base(got.traces[i] ?? []), `job ${i}`).toEqual(base(sim.traces[i] ?? []));
    });
  }

  it('a partly conflicting commit of an incremental job places none of its picks and keeps those unchanged, live and simulated', async () => {
    // 24 RUs, 22 tasks in six incremental jobs of 3-5 tasks arriving together at three agents.
    const sizes = [5, 4, 3, 4, 3, 3];
    let partial = 0;
    for (const seed of [31, 32, 33]) {
      const plans: JobPlan[] = sizes.map((tasks, i) => ({ tasks, at: i * 0.01, profile: PROFILES[(seed + i) % PROFILES.length] as WorkloadProfile }));
      const cell = servers(6, 4);
      const sim = simulated(seed, plans, { agents: 3, cell });
      const got = await live(seed, plans, { agents: 3, cell, together: true });
      checkRace(got, plans, 'live');
      partial += checkRace(sim, plans, 'sim');
    }
    // The simulated race did produce commits that conflicted in part.
    expect(partial).toBeGreaterThan(0);
  });

  it('the simulated race does conflict: the retries above are exercised', () => {
    let conflicts = 0;
    for (const seed of [21, 22, 23]) {
      const plans: JobPlan[] = [3, 2, 1, 2, 1, 1, 1].map((tasks, i) => ({ tasks, at: i * 0.01, profile: PROFILES[i % PROFILES.length] as WorkloadProfile }));
      const sim = simulated(seed, plans, { agents: 3, cell: servers(3, 4) });
      for (const t of sim.traces) for (const x of t) if (x.after?.kind === 'committed') conflicts += x.after.conflicts;
    }
    expect(conflicts).toBeGreaterThan(0);
  });
});
