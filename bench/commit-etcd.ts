/**
 * The commit path on a real etcd: tasks/s and latency of the scheduler (1 and 3 agents, one task
 * per transaction, and 8 tasks per transaction) side by side with a raw etcd transaction loop of
 * the same shape and concurrency, in the same run, on the same etcd.
 * Run: npx tsx bench/commit-etcd.ts [--quick]
 */
import { SchedulingAgent } from '../src/agent/agent.ts';
import { seedCluster, uniformServers } from '../src/agent/seed.ts';
import { DEFAULT_PRIORITY, type JobSpec } from '../src/model/types.ts';
import { openStore } from '../src/store/index.ts';
import { Keys } from '../src/store/keys.ts';
import type { ClusterStore } from '../src/store/types.ts';
import { SystemClock } from '../src/util/clock.ts';
import { createLogger } from '../src/util/log.ts';
import { SeededRng } from '../src/util/rng.ts';
import { ensureEtcd, startEtcd } from '../test/support/etcd.ts';
import { TEST_PROFILES } from '../test/support/jobs.ts';
import { fmt, machine, mdTable, pct, writeResults } from './lib/report.ts';

const quick = process.argv.includes('--quick');
const TASKS = quick ? 1200 : 3000;
const SERVERS = 500; // 4,000 RUs: every task finds a free RU, no completions needed
const IN_FLIGHT_PER_AGENT = 16;

const bin = ensureEtcd((m) => process.stdout.write(`${m}\n`));
const etcd = await startEtcd({ bin });
const url = etcd.endpoint.replace('http://', 'etcd://');
const clock = new SystemClock();
const log = createLogger('bench', 'silent');

interface Row {
  name: string;
  agents: number;
  tasksPerTxn: number;
  inFlight: number;
  tasks: number;
  seconds: number;
  tasksPerSec: number;
  p50ms: number;
  p99ms: number;
  conflicts: number;
  /** CPU time of this process (agents and their etcd clients) per second of wall time. */
  cpuShare?: number;
}
const rows: Row[] = [];

async function withStores<T>(n: number, fn: (stores: ClusterStore[]) => Promise<T>): Promise<T> {
  const stores = await Promise.all(Array.from({ length: n }, () => openStore(url)));
  try {
    return await fn(stores);
  } finally {
    await Promise.all(stores.map((s) => s.close()));
  }
}

/** Raw loop: the same transaction the agent sends for one placement, on pre-chosen free RUs. */
async function rawLoop(clients: number, tasksPerTxn: number): Promise<Row> {
  const keys = new Keys(`/bench-raw-${clients}-${tasksPerTxn}-${Date.now()}/`);
  return withStores(clients + 1, async (stores) => {
    const admin = stores[clients]!;
    await seedCluster(admin, keys, uniformServers(SERVERS, 8));
    // Order the RUs so that consecutive picks land on different servers, as the agent's
    // quality-driven picks do: a transaction then carries one epoch put per placement.
    const all = (await admin.range(keys.rus())).kvs;
    const rus = [...all].sort((a, b) => {
      const ra = keys.parseRu(a.key)!;
      const rb = keys.parseRu(b.key)!;
      return ra.index - rb.index || ra.server.localeCompare(rb.server);
    });
    let next = 0;
    const lat: number[] = [];
    const t0 = performance.now();
    const worker = async (store: ClusterStore, w: number): Promise<void> => {
      for (;;) {
        const start = next;
        next += tasksPerTxn;
        if (start >= TASKS) return;
        const batch = rus.slice(start, start + tasksPerTxn);
        const compare = batch.map((kv) => ({ key: kv.key, target: 'mod' as const, op: '==' as const, value: kv.modRevision }));
        const success = batch.flatMap((kv, i) => [
          { type: 'put' as const, key: kv.key, value: JSON.stringify({ state: 'busy', job: `raw-${w}`, task: i, caused: TEST_PROFILES[0]!.caused, priority: 100, agent: 'raw', since: Date.now(), attempt: 0, basedOn: 0, commitId: 'raw' }) },
          { type: 'put' as const, key: keys.task(`raw-${start}`, i), value: JSON.stringify({ job: `raw-${start}`, index: i, state: 'placed', ru: keys.parseRu(kv.key), attempt: 0 }) },
        ]);
        const servers = new Set(batch.map((kv) => keys.parseRu(kv.key)!.server));
        for (const s of servers) success.push({ type: 'put' as const, key: keys.epoch(s), value: 'raw' });
        success.push({ type: 'put' as const, key: keys.job(`raw-${start}`), value: JSON.stringify({ state: 'placed' }) });
        const s0 = performance.now();
        const res = await store.txn({ compare, success, failure: batch.map((kv) => ({ type: 'get' as const, key: kv.key })) });
        lat.push(performance.now() - s0);
        if (!res.succeeded) throw new Error('raw loop conflict on distinct keys');
      }
    };
    const perClient = IN_FLIGHT_PER_AGENT;
    await Promise.all(Array.from({ length: clients * perClient }, (_, i) => worker(stores[i % clients]!, i)));
    const seconds = (performance.now() - t0) / 1000;
    return {
      name: 'raw etcd txn loop',
      agents: clients,
      tasksPerTxn,
      inFlight: clients * perClient,
      tasks: TASKS,
      seconds,
      tasksPerSec: TASKS / seconds,
      p50ms: pct(lat, 0.5),
      p99ms: pct(lat, 0.99),
      conflicts: 0,
    };
  });
}

async function scheduler(agentsN: number, tasksPerJob: number): Promise<Row> {
  const keys = new Keys(`/bench-sched-${agentsN}-${tasksPerJob}-${Date.now()}/`);
  return withStores(agentsN + 1, async (stores) => {
    await seedCluster(stores[agentsN]!, keys, uniformServers(SERVERS, 8));
    const agents = Array.from(
      { length: agentsN },
      (_, i) => new SchedulingAgent({ id: `a${i}`, store: stores[i]!, keys, clock, rng: new SeededRng(7 + i), log, config: { conflictScope: 'ru' } }),
    );
    await Promise.all(agents.map((a) => a.start()));
    const jobsN = TASKS / tasksPerJob;
    const lat: number[] = [];
    let next = 0;
    const cpu0 = process.cpuUsage();
    const t0 = performance.now();
    const worker = async (agent: SchedulingAgent): Promise<void> => {
      for (;;) {
        const i = next++;
        if (i >= jobsN) return;
        const job: JobSpec = {
          id: `b${i}`,
          name: `b${i}`,
          profile: TEST_PROFILES[i % TEST_PROFILES.length]!,
          tasks: tasksPerJob,
          priority: DEFAULT_PRIORITY,
          mode: 'incremental',
          locality: { mode: 'any', scope: 'server' },
          constraints: {},
          maxQueueMs: 0,
          submittedAt: 0,
        };
        const s0 = performance.now();
        await agent.schedule(job);
        lat.push(performance.now() - s0);
      }
    };
    await Promise.all(Array.from({ length: agentsN * IN_FLIGHT_PER_AGENT }, (_, i) => worker(agents[i % agentsN]!)));
    const seconds = (performance.now() - t0) / 1000;
    const cpu = process.cpuUsage(cpu0);
    const cpuShare = (cpu.user + cpu.system) / 1e6 / seconds;
    const conflicts = agents.reduce((a, g) => a + g.stats.conflicts, 0);
    await Promise.all(agents.map((a) => a.close()));
    return {
      name: 'tarcil agents',
      agents: agentsN,
      tasksPerTxn: tasksPerJob,
      inFlight: agentsN * IN_FLIGHT_PER_AGENT,
      tasks: TASKS,
      seconds,
      tasksPerSec: TASKS / seconds,
      p50ms: pct(lat, 0.5),
      p99ms: pct(lat, 0.99),
      conflicts,
      cpuShare,
    };
  });
}

try {
  for (const [agentsN, perTxn] of [
    [1, 1],
    [3, 1],
    [1, 8],
    [3, 8],
  ] as const) {
    const raw = await rawLoop(agentsN, perTxn);
    const sch = await scheduler(agentsN, perTxn);
    for (const r of [raw, sch]) {
      rows.push(r);
      process.stdout.write(
        `${r.name.padEnd(18)} agents=${r.agents} tasks/txn=${r.tasksPerTxn} in-flight=${r.inFlight}: ${fmt(r.tasksPerSec, 0)} tasks/s, p50 ${fmt(r.p50ms, 2)} ms, p99 ${fmt(r.p99ms, 2)} ms, conflicts ${r.conflicts}${r.cpuShare !== undefined ? `, agent process CPU ${fmt(r.cpuShare * 100, 0)}%` : ''}\n`,
      );
    }
    process.stdout.write(`  → scheduler reaches ${fmt((sch.tasksPerSec / raw.tasksPerSec) * 100, 0)}% of the raw loop\n`);
  }
} finally {
  await etcd.stop();
}

const pairs: (string | number)[][] = [];
for (let i = 0; i < rows.length; i += 2) {
  const raw = rows[i]!;
  const sch = rows[i + 1]!;
  pairs.push([
    sch.agents,
    sch.tasksPerTxn,
    sch.inFlight,
    fmt(raw.tasksPerSec, 0),
    fmt(sch.tasksPerSec, 0),
    `${fmt((sch.tasksPerSec / raw.tasksPerSec) * 100, 0)}%`,
    `${fmt(raw.p50ms, 2)} / ${fmt(raw.p99ms, 2)}`,
    `${fmt(sch.p50ms, 2)} / ${fmt(sch.p99ms, 2)}`,
    sch.conflicts,
  ]);
}
const md = `# Commit path on a real etcd

${TASKS} tasks per cell on ${SERVERS} servers × 8 RUs (every task finds a free RU), ${IN_FLIGHT_PER_AGENT}
requests in flight per agent (or per raw client), each agent with its own etcd client and a
watch-fed cache. The raw loop sends the same transaction an agent sends for the same placements
(compare the RU revisions; put RU, task, epoch and job records; reads in the else branch) on
pre-chosen free RUs, with no scheduling. Scheduler latency is submit → committed (admission,
sampling, scoring, commit, any retries); raw latency is one transaction. Measured with
\`npx tsx bench/commit-etcd.ts${quick ? ' --quick' : ''}\` on ${machine()}, etcd 3.4 on the same machine.

${mdTable(['agents', 'tasks/txn', 'in flight', 'raw tasks/s', 'tarcil tasks/s', 'tarcil / raw', 'raw p50 / p99 ms', 'tarcil p50 / p99 ms', 'conflicts'], pairs)}

Target: the scheduler reaches at least 80% of the raw loop.
`;
const paths = writeResults('commit-etcd', { machine: machine(), tasks: TASKS, servers: SERVERS, rows }, md);
process.stdout.write(`\nwrote ${paths.join(', ')}\n`);
