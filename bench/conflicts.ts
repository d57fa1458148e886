/**
 * Conflict rate and retries per task for 1, 3 and 10 agents under the `ru` and `server` conflict
 * scopes, on a real etcd, 100 servers × 8 RUs, tasks completed by a runner. Open loop: jobs
 * arrive as a Poisson process at 80% of the cluster's capacity, round-robin over the agents; the
 * same arrival sequence for every cell. Run: npx tsx bench/conflicts.ts [--quick]
 */
import { SchedulingAgent, type ConflictScope, type DecisionRecord } from '../src/agent/agent.ts';
import { seedCluster, uniformServers } from '../src/state/seed.ts';
import { SimulatedRunner } from '../src/monitor/sim-runner.ts';
import { openStore } from '../src/store/index.ts';
import { Keys } from '../src/state/keys.ts';
import { SystemClock } from '../src/util/clock.ts';
import { createLogger } from '../src/util/log.ts';
import { SeededRng } from '../src/util/rng.ts';
import { ensureEtcd, startEtcd } from '../test/support/etcd.ts';
import { makeJob, TEST_PROFILES } from '../test/support/jobs.ts';
import { fmt, machine, mdTable, pct, resultsDir, writeResults } from './lib/report.ts';

const quick = process.argv.includes('--quick');
const JOBS = quick ? 400 : 1000;
const TASKS_PER_JOB = 4;
const LOAD = 0.8;
const RUS = 800;
const MEAN_TASK_MS = 1500; // uniform 1,000–2,000 ms
const JOBS_PER_MS = (LOAD * RUS) / (TASKS_PER_JOB * MEAN_TASK_MS);
const clock = new SystemClock();
const keepAlive = setInterval(() => undefined, 1 << 30);
const log = createLogger('bench', 'silent');

const bin = ensureEtcd((m) => process.stdout.write(`${m}\n`));
const etcd = await startEtcd({ bin });
const url = etcd.endpoint.replace('http://', 'etcd://');

interface Row {
  agents: number;
  scope: ConflictScope;
  commits: number;
  conflicts: number;
  conflictRate: number;
  retriesPerTask: number;
  readmissions: number;
  tasksPerSec: number;
  meanQ: number;
  acceptable: number;
  p50ms: number;
  p99ms: number;
}
const rows: Row[] = [];

async function cell(agentsN: number, scope: ConflictScope): Promise<Row> {
  const keys = new Keys(`/bench-conf-${agentsN}-${scope}-${Date.now()}/`);
  const stores = await Promise.all(Array.from({ length: agentsN + 1 }, () => openStore(url)));
  const admin = stores[agentsN]!;
  await seedCluster(admin, keys, uniformServers(100, 8));
  const agents = Array.from(
    { length: agentsN },
    (_, i) =>
      new SchedulingAgent({ id: `a${i}`, store: stores[i]!, keys, clock, rng: new SeededRng(100 + i), log, config: { conflictScope: scope, recheckMs: 50 } }),
  );
  await Promise.all(agents.map((a) => a.start()));
  const runner = new SimulatedRunner({ store: admin, keys, clock, log, durationOf: (r) => r.durationMs ?? MEAN_TASK_MS });
  await runner.start();
  const arrivals = new SeededRng(2024);
  const jobs = Array.from({ length: JOBS }, (_, i) =>
    makeJob(`c${i}`, TEST_PROFILES[i % TEST_PROFILES.length]!, TASKS_PER_JOB, { maxQueueMs: 2000, durationMs: 1000 + Math.round(arrivals.next() * 1000) }),
  );
  const gaps = jobs.map(() => -Math.log(1 - arrivals.next()) / JOBS_PER_MS);
  const lat: number[] = [];
  const t0 = performance.now();
  const pending: Promise<DecisionRecord>[] = [];
  for (let i = 0; i < jobs.length; i++) {
    const s0 = performance.now();
    pending.push(
      agents[i % agentsN]!.schedule(jobs[i]!).then((r) => {
        lat.push(performance.now() - s0);
        return r;
      }),
    );
    await clock.sleep(gaps[i]!);
  }
  const records = await Promise.all(pending);
  const seconds = (performance.now() - t0) / 1000;
  const deadline = Date.now() + 30_000;
  while (runner.stats.completed < JOBS * TASKS_PER_JOB && Date.now() < deadline) await clock.sleep(20);
  await runner.close();
  await Promise.all(agents.map((a) => a.close()));
  await Promise.all(stores.map((s) => s.close()));
  const commits = agents.reduce((a, g) => a + g.stats.commits, 0);
  const conflicts = agents.reduce((a, g) => a + g.stats.conflicts, 0);
  const placements = records.flatMap((r) => r.placements);
  return {
    agents: agentsN,
    scope,
    commits,
    conflicts,
    conflictRate: conflicts / commits,
    retriesPerTask: records.reduce((a, r) => a + r.retries, 0) / placements.length,
    readmissions: records.reduce((a, r) => a + r.readmissions, 0),
    tasksPerSec: placements.length / seconds,
    meanQ: placements.reduce((a, p) => a + p.Q, 0) / placements.length,
    acceptable: placements.filter((p) => p.acceptable).length / placements.length,
    p50ms: pct(lat, 0.5),
    p99ms: pct(lat, 0.99),
  };
}

try {
  for (const scope of ['ru', 'server'] as const) {
    for (const n of [1, 3, 10]) {
      const r = await cell(n, scope);
      rows.push(r);
      process.stdout.write(
        `scope=${scope.padEnd(6)} agents=${String(n).padStart(2)}: ${r.commits} commits, ${r.conflicts} conflicts (${fmt(r.conflictRate * 100, 2)}%), ${fmt(r.retriesPerTask, 3)} retries/task, ${fmt(r.tasksPerSec, 0)} tasks/s, mean Q ${fmt(r.meanQ, 3)}, latency p50 ${fmt(r.p50ms, 1)} ms p99 ${fmt(r.p99ms, 1)} ms\n`,
      );
    }
  }
} finally {
  await etcd.stop();
}

const md = `# Conflicts and retries by agent count and conflict scope

${JOBS} jobs × ${TASKS_PER_JOB} tasks (1–2 s each) on 100 servers × 8 RUs of a real etcd. Jobs arrive as
a Poisson process at ${LOAD * 100}% of the cluster's capacity (${fmt(JOBS_PER_MS * 1000, 0)} jobs/s), round-robin
over the agents, the same arrival sequence in every cell. Each agent has its own etcd client and
watch-fed cache. Latency is submit → all tasks committed, including admission queueing. Measured with \`npx tsx bench/conflicts.ts${quick ? ' --quick' : ''}\` on ${machine()}.

${mdTable(
  ['scope', 'agents', 'commits', 'conflicts', 'conflict rate', 'retries / task', 'back to admission', 'tasks/s', 'mean Q', 'acceptable', 'p50 ms', 'p99 ms'],
  rows.map((r) => [
    r.scope,
    r.agents,
    r.commits,
    r.conflicts,
    `${fmt(r.conflictRate * 100, 2)}%`,
    fmt(r.retriesPerTask, 3),
    r.readmissions,
    fmt(r.tasksPerSec, 0),
    fmt(r.meanQ, 3),
    `${fmt(r.acceptable * 100, 1)}%`,
    fmt(r.p50ms, 1),
    fmt(r.p99ms, 1),
  ]),
)}
`;
const paths = writeResults('conflicts', { machine: machine(), jobs: JOBS, tasksPerJob: TASKS_PER_JOB, load: LOAD, rows }, md, resultsDir(quick, 'conflicts'));
process.stdout.write(`\nwrote ${paths.join(', ')}\n`);
clearInterval(keepAlive);
