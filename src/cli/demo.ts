/**
 * `tarcil demo`: a scripted run on the embedded store that prints every decision.
 */
import { SchedulingAgent, type ConflictScope, type DecisionRecord } from '../agent/agent.ts';
import { seedCluster } from '../state/seed.ts';
import { expandCluster, loadCatalog, resolveCluster } from '../model/catalog.ts';
import { DEFAULT_PRIORITY, type JobSpec } from '../model/types.ts';
import { SimulatedRunner } from '../monitor/sim-runner.ts';
import { jobTarget } from '../quality/index.ts';
import { openStore } from '../store/index.ts';
import { Keys } from '../state/keys.ts';
import { SystemClock } from '../util/clock.ts';
import { createLogger } from '../util/log.ts';
import { SeededRng } from '../util/rng.ts';
import { quantile } from 'simple-statistics';

export interface DemoOptions {
  store: string;
  cluster: string;
  agents: number;
  jobs: number;
  seed: number;
  /** Target utilisation of the cluster by the generated workload, 0..1. */
  load: number;
  scope: ConflictScope;
  /** Scale of task durations (1 = the profiles' typical durations, clamped to 0.2–2 s). */
  timeScale: number;
  verbose: boolean;
  /** The log level (default warn). */
  logLevel?: string;
  out: (line: string) => void;
}

export interface DemoSummary {
  jobs: number;
  tasks: number;
  meanQ: number;
  acceptableShare: number;
  conflicts: number;
  retries: number;
  queuedJobs: number;
  selectMsP50: number;
  commitMsP50: number;
  elapsedMs: number;
}

/**
 * Several agents placing a generated mixed workload on a cluster (the embedded store by default),
 * printing each decision: admission verdict, sample size, candidates, the quality of each pick.
 */
export async function runDemo(o: DemoOptions): Promise<DemoSummary> {
  // Library timers are unref()'d so they never hold a process open; a foreground command does.
  const keepAlive = setInterval(() => undefined, 1 << 30);
  try {
    return await demo(o);
  } finally {
    clearInterval(keepAlive);
  }
}

async function demo(o: DemoOptions): Promise<DemoSummary> {
  const out = o.out;
  const catalog = loadCatalog();
  const spec = resolveCluster(o.cluster, catalog);
  const servers = expandCluster(spec, catalog.platforms);
  const totalRus = servers.reduce((a, s) => a + s.rus, 0);
  const store = await openStore(o.store);
  const keys = new Keys(`/tarcil/demo-${Date.now()}/`);
  const clock = new SystemClock();
  const log = createLogger('tarcil', o.logLevel ?? 'warn');
  const rng = new SeededRng(o.seed);
  await seedCluster(store, keys, servers);
  out(`cluster ${spec.name}: ${servers.length} servers, ${totalRus} RUs (${[...new Set(servers.map((s) => s.platform))].join(', ')}); store ${store.kind}`);

  const agents = Array.from(
    { length: o.agents },
    (_, i) => new SchedulingAgent({ id: `agent-${i + 1}`, store, keys, clock, rng: rng.fork(), log, config: { conflictScope: o.scope } }),
  );
  await Promise.all(agents.map((a) => a.start()));
  const runner = new SimulatedRunner({ store, keys, clock, log, durationOf: (r) => r.durationMs ?? 500 });
  await runner.start();

  const profiles = [...catalog.workloads.values()];
  const jobs: JobSpec[] = [];
  for (let i = 0; i < o.jobs; i++) {
    const p = profiles[rng.int(profiles.length)]!;
    const base = Math.min(2000, Math.max(200, p.typicalDurationMs)) * o.timeScale;
    jobs.push({
      id: `j${String(i + 1).padStart(4, '0')}`,
      name: `${p.name}-${i + 1}`,
      profile: p,
      tasks: 1 + rng.int(6),
      priority: rng.next() < 0.1 ? DEFAULT_PRIORITY + 100 : DEFAULT_PRIORITY,
      mode: 'incremental',
      locality: { mode: rng.next() < 0.2 ? 'spread' : 'any', scope: 'server' },
      constraints: {},
      maxQueueMs: 5000,
      durationMs: Math.round(base * (0.5 + rng.next())),
      submittedAt: 0,
    });
  }
  const meanWork = jobs.reduce((a, j) => a + j.tasks * (j.durationMs ?? 0), 0) / jobs.length;
  const ratePerMs = (o.load * totalRus) / meanWork;
  out(
    `${o.agents} agents, ${jobs.length} jobs (${jobs.reduce((a, j) => a + j.tasks, 0)} tasks), arrivals for ${Math.round(o.load * 100)}% load, conflict scope ${o.scope}`,
  );
  out('');

  const t0 = clock.now();
  const records: DecisionRecord[] = [];
  const pending: Promise<void>[] = [];
  let next = 0;
  for (const job of jobs) {
    const agent = agents[next++ % agents.length]!;
    const p = agent.schedule(job).then((rec) => {
      records.push(rec);
      report(out, job, rec, o.verbose);
    });
    pending.push(p);
    await clock.sleep(-Math.log(1 - rng.next()) / ratePerMs);
  }
  await Promise.all(pending);
  const totalTasks = jobs.reduce((a, j) => a + j.tasks, 0);
  while (runner.stats.completed < totalTasks && clock.now() - t0 < 120_000) await clock.sleep(50);
  const elapsedMs = clock.now() - t0;
  await runner.close();
  await Promise.all(agents.map((a) => a.close()));
  await store.close();

  const placements = records.flatMap((r) => r.placements);
  const selectMs = records.map((r) => r.stageMs.select / Math.max(1, r.placements.length));
  const commitMs = records.map((r) => r.stageMs.commit);
  const summary: DemoSummary = {
    jobs: records.length,
    tasks: placements.length,
    meanQ: placements.reduce((a, p) => a + p.Q, 0) / Math.max(1, placements.length),
    acceptableShare: placements.filter((p) => p.acceptable).length / Math.max(1, placements.length),
    conflicts: records.reduce((a, r) => a + r.conflicts, 0),
    retries: records.reduce((a, r) => a + r.retries, 0),
    queuedJobs: records.filter((r) => r.queuedMs > 0).length,
    selectMsP50: selectMs.length ? quantile(selectMs, 0.5) : 0,
    commitMsP50: commitMs.length ? quantile(commitMs, 0.5) : 0,
    elapsedMs,
  };
  out('');
  out(`done: ${summary.jobs} jobs, ${summary.tasks} tasks placed and completed in ${(elapsedMs / 1000).toFixed(1)} s`);
  out(`  placement quality: mean Q ${summary.meanQ.toFixed(3)}, ${(summary.acceptableShare * 100).toFixed(1)}% of tasks on RUs that do not degrade them`);
  out(`  conflicts ${summary.conflicts} (retries ${summary.retries}), jobs queued by admission control ${summary.queuedJobs}`);
  out(`  per task: sample+score+select p50 ${(summary.selectMsP50 * 1000).toFixed(0)} µs; per job: commit p50 ${summary.commitMsP50.toFixed(2)} ms`);
  return summary;
}

function report(out: (l: string) => void, job: JobSpec, rec: DecisionRecord, verbose: boolean): void {
  const T = jobTarget(job.profile.caused).T;
  const v = rec.admission[rec.admission.length - 1];
  const s = rec.samples[rec.samples.length - 1];
  const verdict = v
    ? `${v.action}${rec.queuedMs > 0 ? ` after ${Math.round(rec.queuedMs)} ms queued` : ''} (${v.acceptableFree}/${v.totalFree} free RUs acceptable)`
    : 'admitted';
  const prio = job.priority > DEFAULT_PRIORITY ? ` prio ${job.priority}` : '';
  out(
    `[${rec.agent}] ${job.id} ${job.profile.name} ×${job.tasks}${prio} T_W=${T.toFixed(3)} ${job.locality.mode} → ${verdict}, R=${s?.R ?? '-'} f=${s ? s.f.toFixed(2) : '-'}, ${s?.candidates ?? 0} candidates${rec.conflicts ? `, ${rec.conflicts} conflicts` : ''}`,
  );
  const picks = rec.placements
    .map((p) => `${p.ru.server}/${p.ru.index} Q=${p.Q.toFixed(2)}${p.acceptable ? '' : '!'}${p.preempted ? `(preempted ${p.preempted.job})` : ''}`)
    .join('  ');
  if (verbose || rec.placements.length <= 6) out(`      ${picks}`);
}
