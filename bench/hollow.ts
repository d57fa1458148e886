/**
 * Hollow nodes at scale: one `tarcil hollow` process running 10,000 nodes of the heterogeneous
 * hollow-10k cell (16 RUs each, 160,000 RUs) against a real etcd this script starts on a free
 * port with a temporary data dir. Measured from outside the process, as an operator would:
 *
 *   1. start → every node registered (the command's ready line; the registration alone from its
 *      /metrics), then the process idle for 15 s: RSS (/proc), V8 heap (/metrics), CPU;
 *   2. half of the RUs (80,000) placed on directly in etcd with the agents' own placement
 *      transaction (src/state/placement.ts, 42 picks per transaction, 4 in flight), tasks of 10 minutes, so
 *      no task ends during the run: time until the nodes have recorded every task running, then
 *      20 s of steady state with 80,000 tasks running (RSS, heap, CPU);
 *   3. SIGUSR2: 5% of the nodes dropped, time until their server records are gone from etcd.
 *
 * The process is then SIGKILLed (a graceful stop would record 76,000 tasks lost one by one) and
 * etcd removed. Results: bench/results/hollow/hollow.{md,json}.
 *
 * Run: npx tsx bench/hollow.ts [--quick]   (--quick: 1,000 nodes, results under bench/results/quick)
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { picksPerTxn } from '../src/agent/attempt.ts';
import { loadCatalog, parseJobSpec } from '../src/model/catalog.ts';
import type { RuRef } from '../src/model/types.ts';
import { Keys } from '../src/state/keys.ts';
import { placementTxn } from '../src/state/placement.ts';
import { isFreeRuValue } from '../src/state/records.ts';
import { openStore } from '../src/store/index.ts';
import { SeededRng } from '../src/util/rng.ts';
import { ensureEtcd, startEtcd } from '../test/support/etcd.ts';
import { cpuSeconds, scrapeMetrics } from './lib/proc-stats.ts';
import { fmt, machine, mdTable, resultsDir, writeResults } from './lib/report.ts';
import { latestTasks } from '../src/state/task-chunks.ts';

const quick = process.argv.includes('--quick');
const NODES = quick ? 1000 : 10_000;
const CLUSTER = 'hollow-10k';
const FILL = 0.5;
const TASK_MS = 600_000;
const KILL_FRACTION = 0.05;
const IDLE_S = 15;
const IN_FLIGHT = 4;
/** The hollow process's lease: long enough to ride out etcd stalls on a shared 2-core machine. */
const LEASE_TTL_S = 30;
const LOADED_S = 20;
const PREFIX = '/bench-hollow/';
const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');

const say = (m: string): void => {
  process.stdout.write(`[hollow] ${m}\n`);
};
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

interface Sample {
  t: number;
  phase: string;
  rssMB: number;
  hwmMB: number;
  heapUsedMB: number;
  heapTotalMB: number;
  cpuS: number;
  running: number;
  busy: number;
  live: number;
}

function procStatus(pid: number): { rssMB: number; hwmMB: number } {
  const s = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (name: string): number => Number(new RegExp(`${name}:\\s+(\\d+) kB`).exec(s)?.[1] ?? NaN);
  return { rssMB: kb('VmRSS') / 1024, hwmMB: kb('VmHWM') / 1024 };
}

const etcdBin = ensureEtcd(say);
const etcd = await startEtcd({ bin: etcdBin, extraArgs: ['--quota-backend-bytes', String(8 * 2 ** 30)] });
const url = etcd.endpoint.replace('http://', 'etcd://');
say(`etcd ${etcdBin} at ${etcd.endpoint}, data in ${etcd.dataDir}`);
const store = await openStore(url);
const keys = new Keys(PREFIX);
const catalog = loadCatalog();
let child: ChildProcess | undefined;
const samples: Sample[] = [];
let phase = 'start';
let sampler: NodeJS.Timeout | undefined;

try {
  // 1. Start and register.
  const t0 = Date.now();
  child = spawn(
    process.execPath,
    // TARCIL_NODE_ARGS (e.g. --prof) goes to node first, to profile the hollow process.
    [
      ...(process.env.TARCIL_NODE_ARGS ?? '').split(' ').filter(Boolean),
      join(ROOT, 'src/cli/bin.js'),
      'hollow',
      '--store',
      url,
      '--prefix',
      PREFIX,
      '--cluster',
      CLUSTER,
      '--servers',
      String(NODES),
      '--metrics-port',
      '0',
      '--kill-fraction',
      String(KILL_FRACTION),
      '--lease-ttl',
      String(LEASE_TTL_S),
    ],
    { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, TARCIL_LOG: 'warn' } },
  );
  const proc = child;
  let stderr = '';
  const logFile = join(tmpdir(), `tarcil-hollow-bench-${process.pid}.log`);
  const logStream = createWriteStream(logFile);
  say(`the hollow process's output (its warnings and errors) goes to ${logFile}`);
  proc.stderr?.on('data', (d: Buffer) => {
    stderr = (stderr + d.toString()).slice(-4000);
    logStream.write(d);
  });
  const ready = await new Promise<string>((resolve, reject) => {
    let out = '';
    proc.stdout?.on('data', (d: Buffer) => {
      logStream.write(d);
      out += d.toString();
      const line = out.split('\n').find((l) => l.startsWith('tarcil hollow:'));
      if (line) resolve(line);
    });
    proc.once('exit', (code) => reject(new Error(`tarcil hollow exited (${code}) before it was ready: ${stderr}`)));
  });
  const readyMs = Date.now() - t0;
  const pid = proc.pid ?? 0;
  const metricsPort = Number(/metrics on :(\d+)/.exec(ready)?.[1]);
  say(ready);
  const sample = async (): Promise<void> => {
    const m = await scrapeMetrics(metricsPort);
    samples.push({
      t: (Date.now() - t0) / 1000,
      phase,
      ...procStatus(pid),
      heapUsedMB: (m.get('nodejs_heap_size_used_bytes') ?? NaN) / 2 ** 20,
      heapTotalMB: (m.get('nodejs_heap_size_total_bytes') ?? NaN) / 2 ** 20,
      cpuS: cpuSeconds(pid),
      running: m.get('tarcil_hollow_running_tasks') ?? NaN,
      busy: m.get('tarcil_hollow_busy_rus') ?? NaN,
      live: m.get('tarcil_hollow_nodes') ?? NaN,
    });
  };
  const metrics0 = await scrapeMetrics(metricsPort);
  const registrationS = metrics0.get('tarcil_hollow_registration_seconds') ?? NaN;
  const servers0 = (await store.range(keys.servers())).kvs.length;
  const rus0 = (await store.range(keys.rus())).kvs;
  say(`ready in ${(readyMs / 1000).toFixed(1)} s (registration ${registrationS.toFixed(1)} s): ${servers0} server records, ${rus0.length} RU records`);
  sampler = setInterval(() => void sample().catch(() => undefined), 1000);

  phase = 'idle';
  await sleep(IDLE_S * 1000);
  const idle = samples.filter((s) => s.phase === 'idle');

  // 2. Fill half of the RUs with long tasks, as agents would commit them.
  phase = 'fill';
  const rng = new SeededRng(7);
  const free = rus0.filter((kv) => isFreeRuValue(kv.value));
  for (let i = free.length - 1; i > 0; i--) {
    const j = rng.int(i + 1);
    [free[i], free[j]] = [free[j] as (typeof free)[number], free[i] as (typeof free)[number]];
  }
  const chosen = free.slice(0, Math.round(rus0.length * FILL));
  const per = picksPerTxn(store.maxTxnOps);
  const chunks: (typeof chosen)[] = [];
  for (let i = 0; i < chosen.length; i += per) chunks.push(chosen.slice(i, i + per));
  const profiles = ['spark-lr', 'hadoop-map', 'memcached', 'spec-mcf', 'tpch-scan', 'parsec-canneal'];
  const tFill = Date.now();
  let next = 0;
  let conflicts = 0;
  let placed = 0;
  let retries = 0;
  const worker = async (): Promise<void> => {
    while (next < chunks.length) {
      const n = next++;
      const chunk = chunks[n] as typeof chosen;
      const job = parseJobSpec({ name: `fill${n}`, profile: profiles[n % profiles.length], tasks: chunk.length, durationMs: TASK_MS }, catalog, {
        id: `fill-${String(n).padStart(5, '0')}`,
        now: Date.now(),
      });
      const items = chunk.map((kv, task) => ({ ref: keys.parseRu(kv.key) as RuRef, task, attempt: 0, ruRev: kv.modRevision, basedOn: 0 }));
      const { req } = placementTxn({ keys, agent: 'bench', commitId: `c${n}`, now: Date.now(), job, items, scope: 'ru', ruState: 'busy' });
      // etcd may time a request out under this load and still apply it: a retry that finds the
      // RUs already holding this commit counts as placed.
      for (let attempt = 0; ; attempt++) {
        try {
          if ((await store.txn(req)).succeeded) placed += chunk.length;
          else if ((await store.get(keys.ru(items[0]?.ref as RuRef)))?.value.includes(`"commitId":"c${n}"`)) placed += chunk.length;
          else conflicts++;
          break;
        } catch (err) {
          if (attempt >= 10) throw err;
          retries++;
          await sleep(500);
        }
      }
    }
  };
  await Promise.all(Array.from({ length: IN_FLIGHT }, worker));
  const commitS = (Date.now() - tFill) / 1000;
  say(`placed ${placed} tasks in ${chunks.length} transactions in ${commitS.toFixed(1)} s (${conflicts} conflicting transactions)`);
  let runningAt = NaN;
  let best = 0;
  let stalled = 0;
  for (let waited = 0; waited < 600 && stalled < 30; waited++) {
    await sleep(1000);
    const running = (await scrapeMetrics(metricsPort).catch(() => new Map<string, number>())).get('tarcil_hollow_running_tasks') ?? 0;
    if (running >= placed) {
      runningAt = (Date.now() - tFill) / 1000;
      break;
    }
    stalled = running > best ? 0 : stalled + 1;
    best = Math.max(best, running);
  }
  const recordedRunning = [...latestTasks(keys, (await store.range(keys.allTasks())).kvs).values()].filter((t) => t.state === 'running').length;
  say(`every task running ${runningAt.toFixed(1)} s after the first commit; ${recordedRunning} task records say running`);

  phase = 'loaded';
  await sleep(LOADED_S * 1000);
  const loaded = samples.filter((s) => s.phase === 'loaded');

  // 3. Drop 5% of the nodes.
  phase = 'kill';
  const tKill = Date.now();
  proc.kill('SIGUSR2');
  const want = NODES - Math.round(NODES * KILL_FRACTION);
  let goneS = NaN;
  for (let waited = 0; waited < 1200; waited++) {
    await sleep(100);
    if ((await store.range(keys.servers())).kvs.length <= want) {
      goneS = (Date.now() - tKill) / 1000;
      break;
    }
  }
  say(`SIGUSR2: ${NODES - want} nodes dropped, their server records gone after ${goneS.toFixed(1)} s`);
  await sleep(3000);
  clearInterval(sampler);
  sampler = undefined;
  await sample();
  const last = samples.at(-1) as Sample;

  const med = (xs: Sample[], f: (s: Sample) => number): number => {
    const v = xs.map(f).sort((a, b) => a - b);
    return v.length === 0 ? NaN : (v[Math.floor(v.length / 2)] as number);
  };
  const cpuShare = (xs: Sample[]): number =>
    xs.length < 2 ? NaN : ((xs.at(-1) as Sample).cpuS - (xs[0] as Sample).cpuS) / ((xs.at(-1) as Sample).t - (xs[0] as Sample).t);
  const rows = [
    { phase: `idle (${IDLE_S} s after registration)`, xs: idle, running: 0 },
    {
      phase: `${placed.toLocaleString('en-US')} tasks placed, ${fmt(
        med(loaded, (x) => x.running),
        0,
      )} running (median, ${LOADED_S} s)`,
      xs: loaded,
      running: placed,
    },
  ];
  const result = {
    machine: machine(),
    node: process.version,
    nodes: NODES,
    rus: rus0.length,
    cluster: CLUSTER,
    readyMs,
    registrationS,
    fill: { tasks: placed, transactions: chunks.length, conflicts, retries, commitS, allRunningS: runningAt, recordedRunning },
    idle: { rssMB: med(idle, (s) => s.rssMB), heapUsedMB: med(idle, (s) => s.heapUsedMB), heapTotalMB: med(idle, (s) => s.heapTotalMB), cpu: cpuShare(idle) },
    loaded: {
      rssMB: med(loaded, (s) => s.rssMB),
      heapUsedMB: med(loaded, (s) => s.heapUsedMB),
      heapTotalMB: med(loaded, (s) => s.heapTotalMB),
      cpu: cpuShare(loaded),
    },
    peakRssMB: last.hwmMB,
    kill: { dropped: NODES - want, serverRecordsGoneS: goneS, liveAfter: last.live },
    samples,
  };
  const md = [
    `# Hollow nodes: ${NODES.toLocaleString('en-US')} nodes in one process`,
    '',
    `\`npx tsx bench/hollow.ts${quick ? ' --quick' : ''}\` on ${machine()}; etcd ${etcdBin} started by the script (one member, temporary data dir).`,
    `One \`tarcil hollow --cluster ${CLUSTER} --servers ${NODES}\` process: ${rus0.length.toLocaleString('en-US')} RUs (16 per node), two platforms, four zones, SSD on half.`,
    '',
    `- **Start to ready** (process start, catalog, every node registered, watch started): ${(readyMs / 1000).toFixed(1)} s; registration alone ${registrationS.toFixed(1)} s`,
    `  (${servers0.toLocaleString('en-US')} server records and ${rus0.length.toLocaleString('en-US')} RU records under one lease, idle nodes ${'registered'} as nested transactions).`,
    `- **Placing half the RUs**: ${chosen.length.toLocaleString('en-US')} tasks in ${chunks.length} placement transactions (${per} picks each, ${IN_FLIGHT} in flight, ${retries} retried after an etcd timeout) took ${commitS.toFixed(1)} s; ${Number.isFinite(runningAt) ? `every task was running on its node ${runningAt.toFixed(1)} s after the first commit` : `**not every task started**: the count of running tasks stopped growing (see the samples in hollow.json and the note below)`} (each node writes its task's \`running\` record in a fenced transaction: ${recordedRunning.toLocaleString('en-US')} records).`,
    `- **Dropping ${(KILL_FRACTION * 100).toFixed(0)}%** (SIGUSR2, ${NODES - want} nodes): their server records were gone from etcd after ${goneS.toFixed(1)} s.`,
    '',
    mdTable(
      ['phase', 'RSS MB (median)', 'V8 heap used / total MB', 'CPU (cores)'],
      rows.map((r) => [
        r.phase,
        fmt(
          med(r.xs, (s) => s.rssMB),
          0,
        ),
        `${fmt(
          med(r.xs, (s) => s.heapUsedMB),
          0,
        )} / ${fmt(
          med(r.xs, (s) => s.heapTotalMB),
          0,
        )}`,
        fmt(cpuShare(r.xs), 2),
      ]),
    ),
    '',
    `Peak RSS of the process over the whole run (VmHWM): **${fmt(last.hwmMB, 0)} MB** (target ≤ 1024 MB).`,
    'RSS is read from /proc, heap from the process\'s /metrics once a second; heap "used" includes garbage not yet collected.',
  ].join('\n');
  for (const f of writeResults('hollow', result, md, resultsDir(quick, 'hollow'))) say(`wrote ${f}`);
  process.stdout.write(`${md}\n`);
} finally {
  if (sampler) clearInterval(sampler);
  if (child && child.exitCode === null) {
    const c = child;
    await new Promise<void>((resolve) => {
      c.once('exit', () => resolve());
      c.kill('SIGKILL');
    });
  }
  await store.close();
  await etcd.stop();
}
