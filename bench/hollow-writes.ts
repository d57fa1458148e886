/**
 * Hollow nodes' task-start writes against a slow etcd: how many starts per second one `tarcil
 * hollow` process records when etcd answers in L ms, and how far its start-write queue falls
 * behind, with the old fixed bound of 128 starts in flight (`--max-writes 128`) and with the
 * default (twice what the process's write requests carry, see hollowMaxWrites in
 * src/monitor/options.ts).
 *
 * One etcd (started here, temporary data dir) and, for each L and each bound, a fresh `tarcil
 * hollow` process of NODES nodes (hollow-10k scaled, 16 RUs each) under its own prefix, talking to
 * etcd through a loopback TCP proxy that delays every chunk by L/2 ms each way (test/support/
 * proxy.ts), so each request of the process takes L ms more. The delay is set once the nodes
 * have registered. Then tasks of 10 minutes (none ends during the run) are placed directly in etcd,
 * not through the proxy, with the agents' placement transaction (src/state/placement.ts), RATE per
 * second in batches every 100 ms for PLACE_S seconds; the script waits up to DRAIN_S more for every
 * task to be recorded running. Measured from outside: the task records that say running (a watch
 * of etcd, timestamped on arrival) per second, the start latency (placement commit → running
 * record seen), and the process's /metrics once a second (start writes waiting, oldest wait,
 * requests and transactions of its group commit, CPU from /proc).
 *
 * Run: npx tsx bench/hollow-writes.ts [--quick]   (--quick: L = 0 and 1000 ms, 15 s of placing;
 * results under bench/results/quick). Results: bench/results/hollow-writes/hollow-writes-latency.{md,json}.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadCatalog, parseJobSpec } from '../src/model/catalog.ts';
import type { RuRef } from '../src/model/types.ts';
import { hollowMaxWrites, HOLLOW_DEFAULTS } from '../src/monitor/options.ts';
import { Keys } from '../src/state/keys.ts';
import { placementTxn } from '../src/state/placement.ts';
import { isFreeRuValue } from '../src/state/records.ts';
import { openStore } from '../src/store/index.ts';
import type { KeyValue } from '../src/store/types.ts';
import { SeededRng } from '../src/util/rng.ts';
import { ensureEtcd, startEtcd } from '../test/support/etcd.ts';
import { tcpProxy } from '../test/support/proxy.ts';
import { cpuSeconds, scrapeMetrics } from './lib/proc-stats.ts';
import { fmt, machine, mdTable, pct, resultsDir, writeResults } from './lib/report.ts';
import { chunkJob, chunkTaskRecords } from '../src/state/task-chunks.ts';

const quick = process.argv.includes('--quick');
const NODES = 2000;
const RATE = 250;
const PLACE_S = quick ? 15 : 60;
const DRAIN_S = quick ? 30 : 90;
const LATENCIES = quick ? [0, 1000] : [0, 250, 1000];
const TICK_MS = 100;
const TASK_MS = 600_000;
const LEASE_TTL_S = 30;
const OLD_BOUND = 128;
const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');

const say = (m: string): void => {
  process.stdout.write(`[hollow-writes] ${m}\n`);
};
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

interface Sample {
  t: number;
  running: number;
  waiting: number;
  inFlight: number;
  oldestWaitS: number;
  requests: number;
  transactions: number;
  cpuS: number;
}

interface RunResult {
  bound: string;
  maxWrites: number;
  latencyMs: number;
  placed: number;
  conflicts: number;
  /** Running records seen while placing, per second. */
  achievedPerS: number;
  /** Seconds after the last placement until every task was running (NaN: not within DRAIN_S). */
  drainS: number;
  notStarted: number;
  p50S: number;
  p99S: number;
  maxS: number;
  peakWaiting: number;
  peakOldestWaitS: number;
  /** Transactions per request of the process's group commit while placing. */
  perRequest: number;
  cpu: number;
  samples: Sample[];
}

const etcdBin = ensureEtcd(say);
const etcdVersion = /etcd Version: (\S+)/.exec(spawnSync(etcdBin, ['--version'], { encoding: 'utf8' }).stdout)?.[1] ?? etcdBin;
const etcd = await startEtcd({ bin: etcdBin, extraArgs: ['--quota-backend-bytes', String(8 * 2 ** 30)] });
const etcdPort = Number(new URL(etcd.endpoint).port);
say(`etcd ${etcdBin} at ${etcd.endpoint}, data in ${etcd.dataDir}`);
const store = await openStore(etcd.endpoint.replace('http://', 'etcd://'));
const catalog = loadCatalog();
const results: RunResult[] = [];
const newBound = hollowMaxWrites(HOLLOW_DEFAULTS.maxWriteRequests, store.maxTxnOps);

async function run(latencyMs: number, maxWrites: number | undefined): Promise<RunResult> {
  const bound = maxWrites === undefined ? 'default' : 'old';
  const prefix = `/bench-hw-${bound}-${latencyMs}/`;
  const keys = new Keys(prefix);
  const proxy = await tcpProxy(etcdPort);
  let child: ChildProcess | undefined;
  let sampler: NodeJS.Timeout | undefined;
  const watch = { handle: undefined as { close(): Promise<void> } | undefined };
  try {
    const args = [
      join(ROOT, 'src/cli/bin.js'),
      'hollow',
      '--store',
      `etcd://127.0.0.1:${proxy.port}`,
      '--prefix',
      prefix,
      '--cluster',
      'hollow-10k',
      '--servers',
      String(NODES),
      '--metrics-port',
      '0',
      '--lease-ttl',
      String(LEASE_TTL_S),
    ];
    if (maxWrites !== undefined) args.push('--max-writes', String(maxWrites));
    child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, TARCIL_LOG: 'warn' } });
    const proc = child;
    let stderr = '';
    proc.stderr?.on('data', (d: Buffer) => {
      stderr = (stderr + d.toString()).slice(-4000);
    });
    const ready = await new Promise<string>((resolve, reject) => {
      let out = '';
      proc.stdout?.on('data', (d: Buffer) => {
        out += d.toString();
        const line = out.split('\n').find((l) => l.startsWith('tarcil hollow:'));
        if (line) resolve(line);
      });
      proc.once('exit', (code) => reject(new Error(`tarcil hollow exited (${code}) before it was ready: ${stderr}`)));
    });
    const metricsPort = Number(/metrics on :(\d+)/.exec(ready)?.[1]);
    const pid = proc.pid ?? 0;

    // Free RUs in a random order, and the running records as etcd delivers them.
    const rus = await store.range(keys.rus());
    const free: KeyValue[] = rus.kvs.filter((kv) => isFreeRuValue(kv.value));
    const rng = new SeededRng(latencyMs + 7);
    for (let i = free.length - 1; i > 0; i--) {
      const j = rng.int(i + 1);
      [free[i], free[j]] = [free[j] as KeyValue, free[i] as KeyValue];
    }
    const committedAt = new Map<string, number>();
    const runningAt = new Map<string, number>();
    watch.handle = await store.watch({
      prefix: keys.allTasks(),
      fromRevision: rus.revision + 1,
      onEvents: (batch) => {
        const now = Date.now();
        for (const ev of batch.events) {
          if (ev.type !== 'put') continue;
          // A chunk record (src/state/task-chunks.ts): every task it names started with it.
          const job = chunkJob(keys, ev.kv.key);
          if (job !== undefined) for (const t of chunkTaskRecords(job, ev.kv)) runningAt.set(keys.task(job, t.index), now);
          else if (ev.kv.value.includes('"state":"running"') && !runningAt.has(ev.kv.key)) runningAt.set(ev.kv.key, now);
        }
      },
      onError: (err) => say(`watch ended: ${err.message}`),
    });
    proxy.delay(latencyMs / 2);
    await sleep(Math.max(1000, latencyMs * 2));

    const t0 = Date.now();
    const samples: Sample[] = [];
    const sample = async (): Promise<void> => {
      const m = await scrapeMetrics(metricsPort);
      samples.push({
        t: (Date.now() - t0) / 1000,
        running: runningAt.size,
        waiting: m.get('tarcil_hollow_start_writes_waiting') ?? NaN,
        inFlight: m.get('tarcil_hollow_start_writes_in_flight') ?? NaN,
        oldestWaitS: m.get('tarcil_hollow_start_write_oldest_wait_seconds') ?? NaN,
        requests: m.get('tarcil_hollow_write_requests_total') ?? NaN,
        transactions: m.get('tarcil_hollow_write_transactions_total') ?? NaN,
        cpuS: cpuSeconds(pid),
      });
    };
    await sample();
    sampler = setInterval(() => void sample().catch(() => undefined), 1000);

    // Place RATE tasks a second, a batch every TICK_MS, each batch one placement transaction.
    const perTick = Math.round((RATE * TICK_MS) / 1000);
    const ticks = Math.round((PLACE_S * 1000) / TICK_MS);
    let next = 0;
    let conflicts = 0;
    const commits: Promise<void>[] = [];
    for (let k = 0; k < ticks && next + perTick <= free.length; k++) {
      const due = t0 + k * TICK_MS;
      if (due > Date.now()) await sleep(due - Date.now());
      const chunk = free.slice(next, next + perTick);
      next += perTick;
      const job = parseJobSpec({ name: `w${k}`, profile: 'spark-lr', tasks: chunk.length, durationMs: TASK_MS }, catalog, {
        id: `w-${String(k).padStart(5, '0')}`,
        now: Date.now(),
      });
      const items = chunk.map((kv, task) => ({ ref: keys.parseRu(kv.key) as RuRef, task, attempt: 0, ruRev: kv.modRevision, basedOn: 0 }));
      const { req } = placementTxn({ keys, agent: 'bench', commitId: `c${k}`, now: Date.now(), job, items, scope: 'ru', ruState: 'busy' });
      commits.push(
        store.txn(req).then((res) => {
          const at = Date.now();
          if (!res.succeeded) conflicts++;
          else for (let task = 0; task < chunk.length; task++) committedAt.set(keys.task(job.id, task), at);
        }),
      );
    }
    await Promise.all(commits);
    const placedAt = Date.now();
    const placingS = (placedAt - t0) / 1000;
    const startedWhilePlacing = [...runningAt.values()].filter((t) => t <= placedAt).length;
    const lastPlacing = samples.at(-1) as Sample;
    let drainS = NaN;
    while (Date.now() - placedAt < DRAIN_S * 1000) {
      if ([...committedAt.keys()].every((key) => runningAt.has(key))) {
        drainS = (Date.now() - placedAt) / 1000;
        break;
      }
      await sleep(200);
    }
    clearInterval(sampler);
    sampler = undefined;
    await sample();

    const lat: number[] = [];
    for (const [key, at] of committedAt) {
      const r = runningAt.get(key);
      if (r !== undefined) lat.push((r - at) / 1000);
    }
    const first = samples[0] as Sample;
    const placingSamples = samples.filter((s) => s.t <= placingS + 0.5);
    const res: RunResult = {
      bound,
      maxWrites: maxWrites ?? newBound,
      latencyMs,
      placed: committedAt.size,
      conflicts,
      achievedPerS: startedWhilePlacing / placingS,
      drainS,
      notStarted: committedAt.size - lat.length,
      p50S: pct(lat, 0.5),
      p99S: pct(lat, 0.99),
      maxS: lat.length ? Math.max(...lat) : NaN,
      peakWaiting: Math.max(...samples.map((s) => s.waiting)),
      peakOldestWaitS: Math.max(...samples.map((s) => s.oldestWaitS)),
      perRequest: (lastPlacing.transactions - first.transactions) / Math.max(1, lastPlacing.requests - first.requests),
      cpu: placingSamples.length > 1 ? ((placingSamples.at(-1) as Sample).cpuS - first.cpuS) / ((placingSamples.at(-1) as Sample).t - first.t) : NaN,
      samples,
    };
    say(
      `L=${latencyMs} ms, max writes ${res.maxWrites}: placed ${res.placed} (${conflicts} conflicting txns) in ${placingS.toFixed(1)} s; ${res.achievedPerS.toFixed(0)} starts/s while placing; ` +
        `all running ${fmt(drainS)} s after; latency p50 ${fmt(res.p50S, 2)} s p99 ${fmt(res.p99S, 2)} s; peak waiting ${res.peakWaiting}, oldest wait ${fmt(res.peakOldestWaitS)} s; ` +
        `${fmt(res.perRequest)} txns/request; cpu ${fmt(res.cpu, 2)}`,
    );
    return res;
  } finally {
    if (sampler) clearInterval(sampler);
    await watch.handle?.close();
    if (child && child.exitCode === null) {
      const c = child;
      await new Promise<void>((resolve) => {
        c.once('exit', () => resolve());
        c.kill('SIGKILL');
      });
    }
    await proxy.close();
    // The next run should not share etcd with this one's keys (its lease expires in LEASE_TTL_S).
    await store.delete(prefix, { prefix: true }).catch((err: unknown) => say(`cleanup of ${prefix} failed: ${String(err)}`));
  }
}

try {
  for (const L of LATENCIES) {
    results.push(await run(L, OLD_BOUND));
    results.push(await run(L, undefined));
  }
  const cmd = `npx tsx bench/hollow-writes.ts${quick ? ' --quick' : ''}`;
  const md = [
    `# Hollow nodes' task-start writes against a slow etcd`,
    '',
    `\`${cmd}\` on ${machine()}; etcd ${etcdVersion} started by the script (one member, temporary data dir).`,
    `Each row: a fresh \`tarcil hollow --cluster hollow-10k --servers ${NODES}\` process (${NODES * 16} RUs) talking to etcd through a loopback proxy that adds L ms to each request (L/2 each way);`,
    `${RATE} tasks/s of 10 min placed directly in etcd (${(RATE * TICK_MS) / 1000} per placement transaction every ${TICK_MS} ms) for ${PLACE_S} s, then up to ${DRAIN_S} s for the rest to start.`,
    `"old": \`--max-writes ${OLD_BOUND}\` (the previous fixed bound); "default": ${newBound} (hollowMaxWrites: 2 × ${HOLLOW_DEFAULTS.maxWriteRequests} requests × (maxTxnOps ${store.maxTxnOps} − 1)).`,
    '',
    mdTable(
      [
        'L (ms)',
        'start bound',
        'placed',
        'starts/s while placing',
        'all running (s after the last placement)',
        'start latency p50 / p99 / max (s)',
        'peak waiting',
        'peak oldest wait (s)',
        'txns per request',
        'CPU (cores)',
      ],
      results.map((r) => [
        r.latencyMs,
        `${r.bound} (${r.maxWrites})`,
        r.placed,
        fmt(r.achievedPerS, 0),
        Number.isFinite(r.drainS) ? fmt(r.drainS) : `not within ${DRAIN_S} s (${r.notStarted} not started)`,
        `${fmt(r.p50S, 2)} / ${fmt(r.p99S, 2)} / ${fmt(r.maxS, 2)}`,
        r.peakWaiting,
        fmt(r.peakOldestWaitS),
        fmt(r.perRequest),
        fmt(r.cpu, 2),
      ]),
    ),
    '',
    "Start latency: from the placement transaction's answer to the running record arriving on a watch of etcd (not through the proxy), so it includes the L/2 the RU event takes to reach the nodes.",
    "Waiting and oldest wait: the process's `tarcil_hollow_start_writes_waiting` and `tarcil_hollow_start_write_oldest_wait_seconds`, scraped once a second (per-second samples in the .json).",
    'Transactions per request: `tarcil_hollow_write_transactions_total` / `tarcil_hollow_write_requests_total` while placing.',
    "Both bounds run with the watch connection's 16 MiB HTTP/2 window (src/store/etcd.ts); with the default 64 KiB the RU events reached the process at about 150 a second at L = 1000 ms, whatever the bound.",
  ].join('\n');
  for (const f of writeResults(
    'hollow-writes-latency',
    { machine: machine(), node: process.version, nodes: NODES, rate: RATE, placeS: PLACE_S, drainS: DRAIN_S, results },
    md,
    resultsDir(quick, 'hollow-writes'),
  ))
    say(`wrote ${f}`);
  process.stdout.write(`${md}\n`);
} finally {
  await store.close();
  await etcd.stop();
}
