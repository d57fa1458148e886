/**
 * Conflict rate and retries per task for 1, 3 and 10 agents under the `ru` and `server` conflict
 * scopes, on a real etcd, 100 servers × 8 RUs, short tasks completed by a runner. The same
 * workload (same jobs, same total concurrency) for every cell.
 * Run: npx tsx bench/conflicts.ts [--quick]
 */
import { SchedulingAgent, type ConflictScope, type DecisionRecord } from '../src/agent/agent.ts';
import { seedCluster, uniformServers } from '../src/agent/seed.ts';
import { SimulatedRunner } from '../src/monitor/sim-runner.ts';
import { openStore } from '../src/store/index.ts';
import { Keys } from '../src/store/keys.ts';
import { SystemClock } from '../src/util/clock.ts';
import { createLogger } from '../src/util/log.ts';
import { SeededRng } from '../src/util/rng.ts';
import { ensureEtcd, startEtcd } from '../test/support/etcd.ts';
import { makeJob, pool, TEST_PROFILES } from '../test/support/jobs.ts';
import { fmt, machine, mdTable, pct, writeResults } from './lib/report.ts';

const quick = process.argv.includes('--quick');
const JOBS = quick ? 300 : 600;
const TASKS_PER_JOB = 4;
const IN_FLIGHT = 60; // jobs in flight in total, split over the agents
const clock = new SystemClock();
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
    (_, i) => new SchedulingAgent({ id: `a${i}`, store: stores[i]!, keys, clock, rng: new SeededRng(100 + i), log, config: { conflictScope: scope, recheckMs: 50 } }),
  );
  await Promise.all(agents.map((a) => a.start()));
  const runner = new SimulatedRunner({ store: admin, keys, clock, log, durationOf: (r) => 100 + ((r.task * 53 + r.job.length) % 100) });
  await runner.start();
  const jobs = Array.from({ length: JOBS }, (_, i) => makeJob(`c${i}`, TEST_PROFILES[i % TEST_PROFILES.length]!, TASKS_PER_JOB, { maxQueueMs: 1000 }));
  const lat: number[] = [];
  const t0 = performance.now();
  const records: DecisionRecord[] = await pool(jobs, IN_FLIGHT, async (job, i) => {
    const s0 = performance.now();
    const r = await agents[i % agentsN]!.schedule(job);
    lat.push(performance.now() - s0);
    return r;
  });
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

${JOBS} jobs × ${TASKS_PER_JOB} tasks (100–200 ms each) on 100 servers × 8 RUs of a real etcd, ${IN_FLIGHT}
jobs in flight in total (split round-robin over the agents), the same jobs in every cell. Each
agent has its own etcd client and watch-fed cache. Latency is submit → all tasks committed,
including admission queueing. Measured with \`npx tsx bench/conflicts.ts${quick ? ' --quick' : ''}\` on ${machine()}.

${mdTable(
  ['scope', 'agents', 'commits', 'conflicts', 'conflict rate', 'retries / task', 'back to admission', 'tasks/s', 'mean Q', 'acceptable', 'p50 ms', 'p99 ms'],
  rows.map((r) => [r.scope, r.agents, r.commits, r.conflicts, `${fmt(r.conflictRate * 100, 2)}%`, fmt(r.retriesPerTask, 3), r.readmissions, fmt(r.tasksPerSec, 0), fmt(r.meanQ, 3), `${fmt(r.acceptable * 100, 1)}%`, fmt(r.p50ms, 1), fmt(r.p99ms, 1)]),
)}
`;
const paths = writeResults('conflicts', { machine: machine(), jobs: JOBS, tasksPerJob: TASKS_PER_JOB, inFlight: IN_FLIGHT, rows }, md);
process.stdout.write(`\nwrote ${paths.join(', ')}\n`);
