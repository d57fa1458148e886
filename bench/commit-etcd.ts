/**
 * The commit path on a real etcd: tasks/s and latency of the scheduler (1 and 3 agents, jobs of
 * one task and of 8 tasks) side by side with a raw etcd transaction loop sending the same
 * transaction per job, at the same concurrency, in the same run, on the same etcd. The scheduler
 * runs twice: with group commit (the default) and with one transaction per decision.
 * Run: npx tsx bench/commit-etcd.ts [--quick] [--only 3x1] [--side raw|tarcil|tarcil-single] [--processes]
 */
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { DEFAULT_AGENT_CONFIG, SchedulingAgent } from '../src/agent/agent.ts';
import { seedCluster, uniformServers } from '../src/state/seed.ts';
import { openStore } from '../src/store/index.ts';
import { Keys } from '../src/state/keys.ts';
import type { ClusterStore } from '../src/store/types.ts';
import { SystemClock } from '../src/util/clock.ts';
import { createLogger } from '../src/util/log.ts';
import { SeededRng } from '../src/util/rng.ts';
import { ensureEtcd, startEtcd } from '../test/support/etcd.ts';
import { TEST_PROFILES } from '../test/support/jobs.ts';
import { benchJob } from './lib/jobs.ts';
import type { AgentChildResult, AgentChildWork } from './lib/agent-child.ts';
import { fmt, machine, mdTable, pct, resultsDir, writeResults } from './lib/report.ts';

const quick = process.argv.includes('--quick');
// Every task finds a free RU and none ends: the cluster fills to 75%.
const SERVERS = quick ? 250 : 2000;
const TASKS = SERVERS * 6;
/** Each cell runs this many times, the variants interleaved; the table shows the median run. */
const REPS = quick ? 1 : 3;
const IN_FLIGHT_PER_AGENT = 16;
// Agents run in this process; --processes runs each in its own process, as deployed (on a
// machine with cores to spare: here they take CPU from etcd).
const processes = process.argv.includes('--processes');
const CHILD = join(import.meta.dirname, 'lib', 'agent-child.ts');
// --only 3x1 runs one cell (agents x tasks per transaction), e.g. to profile it.
const onlyArg = process.argv.indexOf('--only');
const only = onlyArg >= 0 ? process.argv[onlyArg + 1] : undefined;
// --side raw|tarcil|tarcil-single runs one variant only (with --only, e.g. to profile it).
const sideArg = process.argv.indexOf('--side');
const side = sideArg >= 0 ? process.argv[sideArg + 1] : undefined;

const bin = ensureEtcd((m) => process.stdout.write(`${m}\n`));
const etcd = await startEtcd({ bin });
const url = etcd.endpoint.replace('http://', 'etcd://');
const clock = new SystemClock();
const log = createLogger('bench', 'silent');

type Variant = 'raw' | 'tarcil' | 'tarcil-single';
const VARIANT_NAME: Record<Variant, string> = {
  raw: 'raw etcd txn loop',
  tarcil: 'tarcil, group commit',
  'tarcil-single': 'tarcil, one txn per decision',
};

interface Row {
  name: string;
  variant: Variant;
  agents: number;
  tasksPerTxn: number;
  inFlight: number;
  tasks: number;
  seconds: number;
  tasksPerSec: number;
  p50ms: number;
  p99ms: number;
  conflicts: number;
  /** Commit retries (fresh samples after a conflict) per task. */
  retriesPerTask: number;
  /** Requests sent to etcd to commit, per task placed. */
  requestsPerTask: number;
  /** CPU time of this process (agents or raw clients, and their etcd clients) per second of wall time. */
  cpuShare: number;
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
    const cpu0 = process.cpuUsage();
    const t0 = performance.now();
    const worker = async (store: ClusterStore, w: number): Promise<void> => {
      for (;;) {
        const start = next;
        next += tasksPerTxn;
        if (start >= TASKS) return;
        const batch = rus.slice(start, start + tasksPerTxn);
        const compare = batch.map((kv) => ({ key: kv.key, target: 'mod' as const, op: '==' as const, value: kv.modRevision }));
        const success = batch.flatMap((kv, i) => [
          {
            type: 'put' as const,
            key: kv.key,
            value: JSON.stringify({
              state: 'busy',
              job: `raw-${w}`,
              task: i,
              caused: TEST_PROFILES[0]!.caused,
              priority: 100,
              agent: 'raw',
              since: Date.now(),
              attempt: 0,
              basedOn: 0,
              commitId: 'raw',
            }),
          },
          {
            type: 'put' as const,
            key: keys.task(`raw-${start}`, i),
            value: JSON.stringify({ job: `raw-${start}`, index: i, state: 'placed', ru: keys.parseRu(kv.key), attempt: 0 }),
          },
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
    const cpu = process.cpuUsage(cpu0);
    return {
      cpuShare: (cpu.user + cpu.system) / 1e6 / seconds,
      name: VARIANT_NAME.raw,
      variant: 'raw',
      agents: clients,
      tasksPerTxn,
      inFlight: clients * perClient,
      tasks: TASKS,
      seconds,
      tasksPerSec: TASKS / seconds,
      p50ms: pct(lat, 0.5),
      p99ms: pct(lat, 0.99),
      conflicts: 0,
      retriesPerTask: 0,
      requestsPerTask: Math.ceil(TASKS / tasksPerTxn) / TASKS,
    };
  });
}

async function scheduler(agentsN: number, tasksPerJob: number, variant: 'tarcil' | 'tarcil-single'): Promise<Row> {
  const keys = new Keys(`/bench-sched-${variant}-${agentsN}-${tasksPerJob}-${Date.now()}/`);
  return withStores(agentsN + 1, async (stores) => {
    await seedCluster(stores[agentsN]!, keys, uniformServers(SERVERS, 8));
    const config = { conflictScope: 'ru' as const, ...(variant === 'tarcil-single' ? { groupCommit: 0 } : {}) };
    const agents = Array.from(
      { length: agentsN },
      (_, i) => new SchedulingAgent({ id: `a${i}`, store: stores[i]!, keys, clock, rng: new SeededRng(7 + i), log, config }),
    );
    await Promise.all(agents.map((a) => a.start()));
    const jobsN = TASKS / tasksPerJob;
    const lat: number[] = [];
    let retries = 0;
    let next = 0;
    const cpu0 = process.cpuUsage();
    const t0 = performance.now();
    const worker = async (agent: SchedulingAgent): Promise<void> => {
      for (;;) {
        const i = next++;
        if (i >= jobsN) return;
        const job = benchJob(i, tasksPerJob);
        const s0 = performance.now();
        const rec = await agent.schedule(job);
        lat.push(performance.now() - s0);
        retries += rec.retries;
      }
    };
    await Promise.all(Array.from({ length: agentsN * IN_FLIGHT_PER_AGENT }, (_, i) => worker(agents[i % agentsN]!)));
    const seconds = (performance.now() - t0) / 1000;
    const cpu = process.cpuUsage(cpu0);
    const conflicts = agents.reduce((a, g) => a + g.stats.conflicts, 0);
    const requests = agents.reduce((a, g) => a + (g.groupCommitStats?.requests ?? g.stats.commits), 0);
    await Promise.all(agents.map((a) => a.close()));
    return schedulerRow(variant, agentsN, tasksPerJob, {
      tasks: TASKS,
      seconds,
      latenciesMs: lat,
      conflicts,
      retries,
      requests,
      cpuSeconds: (cpu.user + cpu.system) / 1e6,
    });
  });
}

/** The same measurement with each agent in its own process (bench/lib/agent-child.ts), as deployed. */
async function schedulerProcesses(agentsN: number, tasksPerJob: number, variant: 'tarcil' | 'tarcil-single'): Promise<Row> {
  const keys = new Keys(`/bench-proc-${variant}-${agentsN}-${tasksPerJob}-${Date.now()}/`);
  await withStores(1, ([admin]) => seedCluster(admin!, keys, uniformServers(SERVERS, 8)));
  const jobsN = TASKS / tasksPerJob;
  const children = Array.from({ length: agentsN }, (_, i) => {
    const work: AgentChildWork = {
      url,
      prefix: keys.prefix,
      id: `a${i}`,
      seed: 7 + i,
      jobs: Array.from({ length: jobsN }, (_, n) => n).filter((n) => n % agentsN === i),
      tasksPerJob,
      inFlight: IN_FLIGHT_PER_AGENT,
      groupCommit: variant === 'tarcil-single' ? 0 : DEFAULT_AGENT_CONFIG.groupCommit,
    };
    const child = spawn(process.execPath, ['--import', 'tsx', CHILD, JSON.stringify(work)], { stdio: ['pipe', 'pipe', 'inherit'] });
    const lines = createInterface({ input: child.stdout });
    const queue: string[] = [];
    const waiters: ((line: string) => void)[] = [];
    lines.on('line', (line) => {
      const w = waiters.shift();
      if (w) w(line);
      else queue.push(line);
    });
    const exited = new Promise<void>((resolve, reject) =>
      child.on('exit', (code) => (code === 0 ? resolve() : reject(new Error(`agent process ${i} exited with code ${String(code)}`)))),
    );
    const nextLine = (): Promise<string> =>
      Promise.race([
        new Promise<string>((resolve) => {
          const l = queue.shift();
          if (l !== undefined) resolve(l);
          else waiters.push(resolve);
        }),
        exited.then(() => {
          throw new Error(`agent process ${i} ended early`);
        }),
      ]);
    return { child, nextLine, exited };
  });
  for (const c of children) {
    const line = await c.nextLine();
    if (line !== 'ready') throw new Error(`agent process said ${line}`);
  }
  for (const c of children) c.child.stdin.write('go\n');
  const results = await Promise.all(children.map(async (c) => JSON.parse(await c.nextLine()) as AgentChildResult));
  await Promise.all(children.map((c) => c.exited));
  const start = Math.min(...results.map((r) => r.start));
  const seconds = (Math.max(...results.map((r) => r.end)) - start) / 1000;
  const sum = (f: (r: AgentChildResult) => number): number => results.reduce((a, r) => a + f(r), 0);
  return schedulerRow(variant, agentsN, tasksPerJob, {
    tasks: sum((r) => r.tasks),
    seconds,
    latenciesMs: results.flatMap((r) => r.latenciesMs),
    conflicts: sum((r) => r.conflicts),
    retries: sum((r) => r.retries),
    requests: sum((r) => r.requests),
    cpuSeconds: sum((r) => r.cpuSeconds),
  });
}

/** A scheduler row from what its agents measured. */
function schedulerRow(
  variant: 'tarcil' | 'tarcil-single',
  agentsN: number,
  tasksPerJob: number,
  m: { tasks: number; seconds: number; latenciesMs: number[]; conflicts: number; retries: number; requests: number; cpuSeconds: number },
): Row {
  return {
    name: VARIANT_NAME[variant],
    variant,
    agents: agentsN,
    tasksPerTxn: tasksPerJob,
    inFlight: agentsN * IN_FLIGHT_PER_AGENT,
    tasks: m.tasks,
    seconds: m.seconds,
    tasksPerSec: m.tasks / m.seconds,
    p50ms: pct(m.latenciesMs, 0.5),
    p99ms: pct(m.latenciesMs, 0.99),
    conflicts: m.conflicts,
    retriesPerTask: m.retries / m.tasks,
    requestsPerTask: m.requests / m.tasks,
    cpuShare: m.cpuSeconds / m.seconds,
  };
}

const run = (variant: Variant, agentsN: number, perTxn: number): Promise<Row> =>
  variant === 'raw' ? rawLoop(agentsN, perTxn) : processes ? schedulerProcesses(agentsN, perTxn, variant) : scheduler(agentsN, perTxn, variant);

const cells: { raw: Row; tarcil: Row; single: Row }[] = [];
/** The run with the median throughput (the lower middle one for an even count). */
function medianRun(runs: Row[] | undefined): Row | undefined {
  if (!runs || runs.length === 0) return undefined;
  const sorted = [...runs].sort((a, b) => a.tasksPerSec - b.tasksPerSec);
  return sorted[Math.floor((sorted.length - 1) / 2)];
}
try {
  for (const [agentsN, perTxn] of [
    [1, 1],
    [3, 1],
    [1, 8],
    [3, 8],
  ] as const) {
    if (only !== undefined && only !== `${agentsN}x${perTxn}`) continue;
    const variants: Variant[] = side !== undefined ? [side as Variant] : ['raw', 'tarcil', 'tarcil-single'];
    const got: Partial<Record<Variant, Row[]>> = {};
    for (let rep = 0; rep < REPS; rep++) {
      for (const v of variants) {
        const r = await run(v, agentsN, perTxn);
        (got[v] ??= []).push(r);
        rows.push(r);
        process.stdout.write(
          `${r.name.padEnd(30)} agents=${r.agents} tasks/job=${r.tasksPerTxn} in-flight=${r.inFlight}: ${fmt(r.tasksPerSec, 0)} tasks/s, p50 ${fmt(r.p50ms, 2)} ms, p99 ${fmt(r.p99ms, 2)} ms, etcd requests/task ${fmt(r.requestsPerTask, 3)}, conflicts ${r.conflicts}, process CPU ${fmt(r.cpuShare * 100, 0)}%\n`,
        );
      }
    }
    const raw = medianRun(got.raw);
    const tarcil = medianRun(got.tarcil);
    const single = medianRun(got['tarcil-single']);
    if (raw && tarcil && single) {
      cells.push({ raw, tarcil, single });
      process.stdout.write(
        `  → median of ${REPS}: tarcil reaches ${fmt((tarcil.tasksPerSec / raw.tasksPerSec) * 100, 0)}% of the raw loop (${fmt((single.tasksPerSec / raw.tasksPerSec) * 100, 0)}% with one txn per decision)\n`,
      );
    }
  }
} finally {
  await etcd.stop();
}

const ratio = (a: Row, b: Row): string => `${fmt((a.tasksPerSec / b.tasksPerSec) * 100, 0)}%`;
const lat = (r: Row): string => `${fmt(r.p50ms, 1)} / ${fmt(r.p99ms, 1)}`;
const md = `# Commit path on a real etcd

${TASKS} tasks per run on ${SERVERS} servers × 8 RUs (every task finds a free RU; no task ends, so the
cluster fills to ${fmt((TASKS / (SERVERS * 8)) * 100, 0)}%), ${IN_FLIGHT_PER_AGENT} jobs in flight per agent (or per raw client), each
agent with its own etcd client and watch-fed cache, ${processes ? 'each agent in its own process' : 'all in one process'}. Each cell ran ${REPS} time(s),
the three variants interleaved; the table shows each variant's median run, and ratios of medians.

- **raw loop**: per job, the transaction an agent sends for it (compare the RU revisions; put RU,
  task, epoch and job records; reads in the else branch) on pre-chosen free RUs, with no
  scheduling: one etcd request per job.
- **tarcil, group commit** (the default): admission, sampling, scoring and a commit per job; the
  decisions an agent makes while its previous request is in flight leave together in one request
  (nested transactions, each with its own compares and outcome).
- **tarcil, one txn per decision**: the same with group commit off (\`groupCommit: 0\`).

Latency is submit → committed for the scheduler (admission, sampling, scoring, commit, retries)
and one transaction for the raw loop. Measured with \`npx tsx bench/commit-etcd.ts${quick ? ' --quick' : ''}${processes ? ' --processes' : ''}\` on ${machine()},
etcd 3.4 on the same machine.

${mdTable(
  [
    'agents',
    'tasks/job',
    'raw tasks/s',
    'tarcil tasks/s (vs raw)',
    'one txn per decision (vs raw)',
    'p50 / p99 ms: raw, tarcil, one txn',
    'etcd requests/task: raw, tarcil',
    'conflicts (retries/task)',
  ],
  cells.map(({ raw, tarcil, single }) => [
    tarcil.agents,
    tarcil.tasksPerTxn,
    fmt(raw.tasksPerSec, 0),
    `${fmt(tarcil.tasksPerSec, 0)} (${ratio(tarcil, raw)})`,
    `${fmt(single.tasksPerSec, 0)} (${ratio(single, raw)})`,
    `${lat(raw)}; ${lat(tarcil)}; ${lat(single)}`,
    `${fmt(raw.requestsPerTask, 3)}, ${fmt(tarcil.requestsPerTask, 3)}`,
    `${tarcil.conflicts} (${fmt(tarcil.retriesPerTask, 3)})`,
  ]),
)}

Target: the scheduler reaches at least 80% of the raw loop.
`;
if (only === undefined && side === undefined) {
  const paths = writeResults(
    processes ? 'commit-etcd-processes' : 'commit-etcd',
    { machine: machine(), tasks: TASKS, servers: SERVERS, reps: REPS, rows },
    md,
    resultsDir(quick, 'commit-etcd'),
  );
  process.stdout.write(`\nwrote ${paths.join(', ')}\n`);
}
