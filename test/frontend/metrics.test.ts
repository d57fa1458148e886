import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadCatalog } from '../../src/model/catalog.ts';
import { startScheduler, type SchedulerProcess } from '../../src/frontend/runtime.ts';
import { MemoryStore } from '../../src/store/memory.ts';
import { Keys } from '../../src/state/keys.ts';
import { SystemClock } from '../../src/util/clock.ts';
import { createLogger } from '../../src/util/log.ts';
import { SeededRng } from '../../src/util/rng.ts';

/**
 * The front-end's /metrics exposes the event-loop delay: prom-client's default metrics
 * (collectDefaultMetrics, under their standard names) include monitorEventLoopDelay's p50, p90,
 * p99, min, max, mean and stddev since the previous scrape, plus a one-shot lag probe. A
 * stalled event loop (a big job evaluated in one go) must show in the max.
 */
const store = new MemoryStore();
let sched: SchedulerProcess;

beforeAll(async () => {
  sched = await startScheduler({
    name: 'metrics',
    store,
    keys: new Keys('/metrics/'),
    catalog: loadCatalog(),
    clock: new SystemClock(),
    rng: new SeededRng(5),
    log: createLogger('test'),
    agents: 1,
    host: '127.0.0.1',
    port: 0,
    metricsPort: 0,
  });
});
afterAll(async () => {
  await sched?.close();
  await store.close();
});

async function scrape(): Promise<Map<string, number>> {
  const res = await fetch(`http://127.0.0.1:${sched.metricsPort}/metrics`);
  expect(res.status).toBe(200);
  const out = new Map<string, number>();
  for (const line of (await res.text()).split('\n')) {
    if (line.startsWith('#') || line.trim() === '') continue;
    const sp = line.lastIndexOf(' ');
    out.set(line.slice(0, sp), Number(line.slice(sp + 1)));
  }
  return out;
}

const LAG = 'nodejs_eventloop_lag';

describe('front-end /metrics: event-loop delay', () => {
  it('exposes the event-loop delay p50, p99 and max as numbers', async () => {
    await new Promise((r) => setTimeout(r, 100)); // a few samples of the delay histogram
    const m = await scrape();
    for (const name of [`${LAG}_seconds`, `${LAG}_p50_seconds`, `${LAG}_p90_seconds`, `${LAG}_p99_seconds`, `${LAG}_max_seconds`, `${LAG}_mean_seconds`]) {
      expect(m.has(name), `${name} is exported`).toBe(true);
      expect(Number.isFinite(m.get(name)), `${name} = ${m.get(name)}`).toBe(true);
      expect(m.get(name)).toBeGreaterThanOrEqual(0);
    }
    expect(m.get(`${LAG}_p99_seconds`)).toBeLessThanOrEqual(m.get(`${LAG}_max_seconds`)!);
  });

  it('shows a 300 ms stall of the event loop in the max of the next scrape', async () => {
    await scrape(); // the delay histogram restarts at each scrape
    // Node's histogram does not record the first interval after reset(): a stall that begins
    // within one sampling period (prom-client's default, 10 ms) of a scrape is not seen. Let a
    // few periods pass first.
    await new Promise((r) => setTimeout(r, 50));
    const t = Date.now();
    while (Date.now() - t < 300) {
      // busy: nothing else runs
    }
    await new Promise((r) => setTimeout(r, 50));
    const m = await scrape();
    expect(m.get(`${LAG}_max_seconds`)).toBeGreaterThanOrEqual(0.28);
    expect(m.get(`${LAG}_max_seconds`)).toBeLessThan(5);
  });
});

describe('front-end /metrics: the job owner', () => {
  it('exports its owned jobs, fenced leases, adoptions and queued adoptions as read from it', async () => {
    const m = await scrape();
    expect(m.get('tarcil_owned_jobs')).toBe(sched.manager.ownedJobs().length);
    expect(m.get('tarcil_owner_leases_fenced')).toBe(sched.manager.stats.fencedLeases);
    expect(m.get('tarcil_owner_lease_pauses')).toBe(sched.manager.stats.leasePauses);
    expect(m.get('tarcil_jobs_adopted')).toBe(sched.manager.stats.adopted);
    expect(m.get('tarcil_task_outcomes_carried')).toBe(sched.manager.stats.outcomesCarried);
    expect(m.get('tarcil_tasks_swept')).toBe(sched.manager.stats.sweptTasks);
    expect(m.get('tarcil_recent_ends')).toBe(sched.manager.recentEnds.size);
    expect(m.get('tarcil_recent_ends_bytes')).toBe(sched.manager.recentEnds.keptChars);
    expect(m.get('tarcil_task_outcomes_from_recent_ends')).toBe(sched.manager.stats.outcomesFromRecentEnds);
    expect(m.get('tarcil_adoptions_queued')).toBe(sched.manager.adoptions.queued);
    expect(m.get('tarcil_launch_calls')).toBe(sched.manager.stats.launches);
    const commits = (): number => sched.manager.agents.reduce((n, a) => n + a.stats.commits, 0);
    expect(m.get('tarcil_commits')).toBe(commits());
    const agent = sched.manager.agents[sched.manager.agents.length - 1]!;
    agent.stats.commits += 2;
    expect((await scrape()).get('tarcil_commits')).toBe(commits());
    agent.stats.commits -= 2;
    agent.stats.samples += 3;
    agent.stats.candidates += 40;
    const after = await scrape();
    expect(after.get('tarcil_samples')).toBe(sched.manager.agents.reduce((n, a) => n + a.stats.samples, 0));
    expect(after.get('tarcil_candidates_scored')).toBe(sched.manager.agents.reduce((n, a) => n + a.stats.candidates, 0));
    expect(after.get('tarcil_candidates_scored')).toBeGreaterThanOrEqual(40);
    expect(after.get('tarcil_reserve_holds')).toBe(sched.manager.agents.reduce((n, a) => n + a.stats.reserveHolds, 0));
    agent.stats.samples -= 3;
    agent.stats.candidates -= 40;
    agent.stats.frontEndRaces.turn += 2;
    agent.stats.frontEndRaces.split += 1;
    agent.stats.frontEndLagMs += 750;
    const raced = await scrape();
    const sum = (f: (a: (typeof sched.manager.agents)[number]) => number): number => sched.manager.agents.reduce((n, a) => n + f(a), 0);
    expect(raced.get('tarcil_commit_conflicts_front_end_total{race="turn"}')).toBe(sum((a) => a.stats.frontEndRaces.turn));
    expect(raced.get('tarcil_commit_conflicts_front_end_total{race="split"}')).toBe(sum((a) => a.stats.frontEndRaces.split));
    expect(raced.get('tarcil_commit_conflicts_front_end_total{race="turn"}')).toBeGreaterThanOrEqual(2);
    expect(raced.get('tarcil_commit_conflicts_front_end_lag_ms')).toBe(sum((a) => a.stats.frontEndLagMs));
    agent.stats.frontEndRaces.turn -= 2;
    agent.stats.frontEndRaces.split -= 1;
    agent.stats.frontEndLagMs -= 750;
    // Read at each scrape, not copied once.
    sched.manager.stats.adopted += 3;
    expect((await scrape()).get('tarcil_jobs_adopted')).toBe(sched.manager.stats.adopted);
    sched.manager.stats.adopted -= 3;
  });
});

describe('front-end /metrics: the housekeeper', () => {
  it('says whether this front-end is the elected housekeeper, and what it has done', async () => {
    // The only front-end of the cell wins the election soon after it starts.
    let m = await scrape();
    for (let i = 0; i < 50 && m.get('tarcil_housekeeper_leading') !== 1; i++) {
      await new Promise((r) => setTimeout(r, 100));
      m = await scrape();
    }
    expect(m.get('tarcil_housekeeper_leading')).toBe(1);
    expect(m.get('tarcil_housekeeper_elections')).toBe(1);
    expect(m.get('tarcil_housekeeper_stuck_waits')).toBe(0);
    for (const name of ['tarcil_housekeeper_compacted_revision', 'tarcil_retention_sweeps', 'tarcil_retention_jobs_deleted']) {
      expect(m.get(name), `${name} is exported`).toBeGreaterThanOrEqual(0);
    }
  });
});
