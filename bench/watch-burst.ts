/**
 * A burst of WatchJob streams of one job: what it does to the front-end's event loop. `tarcil up`
 * (embedded store, from the sources) runs in a child process; this process is the clients.
 *
 * Each round starts a fresh child for each case, a 20-task job whose tasks run for 10 minutes, then
 * opens `--watchers` WatchJob streams of that job in one go, spread over `--connections` gRPC
 * connections (each connected beforehand), and waits until every stream had its first event.
 * The cases are the connection counts crossed with the `--calls-per-turn` values (0: every call set
 * up in the turn it arrives), taken in turn within each round so that the machine's load falls on
 * all of them alike. Every child gets limits that let all the streams in on any number of
 * connections (`--max-watches-per-connection` and `--max-streams-per-connection` of the
 * watchers), so that the burst, not a cap, is what is measured.
 *
 * Measured on the child while the streams open: the longest event-loop delay from its /metrics
 * (prom-client's monitorEventLoopDelay, read and reset every 250 ms); its stalls from
 * bench/lib/turn-probe.mjs, preloaded: each stall's length and how long the event loop's thread
 * ran on a core meanwhile (its own work; on a machine shared with other work a stall is also
 * time spent waiting for a core); the longest round trip of a health check sent every 50 ms on a
 * connection of its own from a worker thread (so that the clients' own work does not delay it);
 * the child's CPU time; each stream's first event.
 *
 * With `--profile DIR`, each case's child runs with `--cpu-prof` (a sample every 250 µs) into
 * DIR/r<round>-c<connections>-t<calls per turn>/, beside the stalls its probe saw, and what the
 * child ran in its longest stalls is printed (and written to stalls.txt there): the profile's
 * samples between the probe's two ticks around each stall, by kind (GC; `idle`, which is also
 * native work outside JavaScript, such as nghttp2's parsing of a read; the WatchJob pumps; the
 * pacer's turn; Node's making of HTTP/2 streams; otherwise the callback the loop ran and the
 * first frame of the project or a library under it).
 *
 * Run: npx tsx bench/watch-burst.ts [--runs 3] [--watchers 10000] [--connections 1,10,100]
 *        [--calls-per-turn 0,100] [--node-args '--single-threaded-gc'] [--label NAME] [--quick]
 *        [--profile DIR]
 * Writes bench/results/watch-burst/<label>.{json,md} (bench/results/quick/ with --quick).
 */
import * as grpc from '@grpc/grpc-js';
import { copyFileSync, existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { constants, performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import type { SchedulerClient } from '../src/rpc/gen/tarcil/v1/Scheduler.ts';
import { clientConstructor } from '../src/rpc/proto-root.ts';
import { openTimedWatch } from './lib/first-event.ts';
import { cpuSeconds, scrapeMetrics } from './lib/proc-stats.ts';
import { fmt, machine, mdTable, pct, resultsDir, writeResults } from './lib/report.ts';
import { startUp } from './lib/up.ts';
import { stallProfile } from './lib/stall-profile.ts';

function arg(name: string): string | undefined {
  const i = process.argv.indexOf(name);
  return i >= 0 ? process.argv[i + 1] : undefined;
}
const list = (v: string): number[] => v.split(',').map((x) => Number(x.trim()));
const quick = process.argv.includes('--quick');
const runs = Number(arg('--runs') ?? (quick ? 1 : 3));
const watchers = Number(arg('--watchers') ?? (quick ? 2000 : 10_000));
const connectionCounts = list(arg('--connections') ?? '1,10,100');
const perTurns = list(arg('--calls-per-turn') ?? '0,100');
const label = arg('--label') ?? 'run';
/** Node flags for the child, e.g. "--single-threaded-gc". */
const nodeArgs = (arg('--node-args') ?? '').split(' ').filter(Boolean);
/** A folder for each case's CPU profile of the child and its stalls (see stallProfile). */
const profileDir = arg('--profile');
for (const [n, v] of [
  ['--runs', runs],
  ['--watchers', watchers],
] as const)
  if (!Number.isInteger(v)) throw new Error(`${n} must be an integer`);
if ([...connectionCounts, ...perTurns].some((x) => !Number.isInteger(x) || x < 0))
  throw new Error('--connections and --calls-per-turn are lists of integers ≥ 0');

const TASKS = 20;
/** V8's kinds of collection as perf_hooks numbers them (`constants.NODE_PERFORMANCE_GC_*`). */
const GC_KINDS: Record<number, string> = {
  [constants.NODE_PERFORMANCE_GC_MINOR]: 'minor',
  [constants.NODE_PERFORMANCE_GC_MAJOR]: 'major',
  [constants.NODE_PERFORMANCE_GC_INCREMENTAL]: 'incremental',
  [constants.NODE_PERFORMANCE_GC_WEAKCB]: 'weak callbacks',
};
process.env.TARCIL_FROM_SOURCE = '1';
const PROBE = fileURLToPath(new URL('./lib/turn-probe.mjs', import.meta.url));

const say = (m: string): void => {
  process.stdout.write(`${m}\n`);
};
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
const load = (): string => readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ');

/** A Scheduler client on a connection of its own. */
function client(port: number): SchedulerClient {
  return new (clientConstructor('tarcil.v1.Scheduler'))(`127.0.0.1:${port}`, grpc.credentials.createInsecure(), {
    'grpc.use_local_subchannel_pool': 1,
  }) as unknown as SchedulerClient;
}

function unary<T>(f: (opts: grpc.CallOptions, cb: (err: grpc.ServiceError | null, v?: T) => void) => void): Promise<T> {
  return new Promise((resolve, reject) => f({ deadline: Date.now() + 30_000 }, (err, v) => (err ? reject(err) : resolve(v as T))));
}

/** A health check every 50 ms from a thread of its own; its longest round trip once told to stop. */
const HEALTH_WORKER = `
const { parentPort, workerData } = require('node:worker_threads');
const grpc = require('@grpc/grpc-js');
const raw = (b) => b;
const Health = grpc.makeGenericClientConstructor({ Check: { path: '/grpc.health.v1.Health/Check', requestStream: false, responseStream: false, requestSerialize: () => Buffer.alloc(0), requestDeserialize: raw, responseSerialize: raw, responseDeserialize: raw } }, 'Health');
const c = new Health('127.0.0.1:' + workerData.port, grpc.credentials.createInsecure(), { 'grpc.use_local_subchannel_pool': 1 });
let running = true;
let max = 0;
parentPort.on('message', () => (running = false));
(async () => {
  while (running) {
    const t0 = performance.now();
    await new Promise((resolve) => c.Check(Buffer.alloc(0), { deadline: Date.now() + 60000 }, () => resolve()));
    max = Math.max(max, performance.now() - t0);
    await new Promise((r) => setTimeout(r, 50));
  }
  c.close();
  parentPort.postMessage(max);
})();
`;

function healthProbe(port: number): { stop(): Promise<number> } {
  const w = new Worker(HEALTH_WORKER, { eval: true, workerData: { port } });
  const done = new Promise<number>((resolve, reject) => {
    w.once('message', (m: number) => resolve(m));
    w.once('error', reject);
  });
  return {
    stop: async () => {
      w.postMessage('stop');
      const max = await done;
      await w.terminate();
      return max;
    },
  };
}

interface Result {
  round: number;
  connections: number;
  callsPerTurn: number;
  load: string;
  /** prom-client's longest event-loop delay, over the burst. */
  maxLoopDelayMs: number;
  /** The longest stall, and the most the event loop's thread ran on a core within one stall. */
  maxStallMs: number;
  maxStallRunMs: number;
  /** The GC pauses within that stall (wall time, ended in it). */
  maxStallGcMs: number;
  /** The longest garbage collection (V8's pause, on the event loop's thread). */
  maxGcMs: number;
  /** The collections of 50 ms or more: ms, and V8's kind. */
  longGcs: [number, string][];
  maxHealthMs: number;
  cpuS: number;
  firstEventMs: { p50: number; p99: number; max: number };
  got: number;
  ended: Record<string, number>;
}

async function burst(round: number, connections: number, callsPerTurn: number): Promise<Result> {
  const probeFile = join(tmpdir(), `watch-burst-${process.pid}-${Date.now()}.json`);
  process.env.TURN_PROBE_OUT = probeFile;
  const limits = [
    '--calls-per-turn',
    String(callsPerTurn),
    '--max-watches-per-connection',
    String(watchers),
    '--max-streams-per-connection',
    String(watchers + 100),
  ];
  const caseDir = profileDir ? join(profileDir, `r${round}-c${connections}-t${callsPerTurn}`) : undefined;
  const prof = caseDir ? ['--cpu-prof', `--cpu-prof-dir=${caseDir}`, '--cpu-prof-interval=250'] : [];
  const up = await startUp(limits, [...nodeArgs, ...prof, '--import', PROBE]);
  const pid = up.proc.pid as number;
  const loadAt = load();
  const c = client(up.port);
  const chans = Array.from({ length: connections }, () => client(up.port));
  const calls: ReturnType<SchedulerClient['WatchJob']>[] = [];
  let window: { from: number; to: number } | undefined;
  try {
    const spec = { name: 'watched', profile: 'spark-lr', tasks: TASKS, durationMs: 600_000, maxQueueMs: 0, mode: 'incremental' };
    const { jobId } = await unary<{ jobId: string }>((o, cb) => c.SubmitJob({ specJson: JSON.stringify(spec) }, o, cb));
    for (let i = 0; i < 100; i++) {
      const j = await unary<{ state: string }>((o, cb) => c.GetJob({ jobId, taskLimit: 1 }, o, cb));
      if (j.state === 'running') break;
      await sleep(100);
    }
    await Promise.all(chans.map((ch) => new Promise<void>((resolve, reject) => ch.waitForReady(Date.now() + 10_000, (e) => (e ? reject(e) : resolve())))));
    await sleep(1000);
    // Watched from here: the histogram reset, the health probe started.
    await scrapeMetrics(up.metricsPort);
    let running = true;
    let maxLoopDelayMs = 0;
    const scrape = (async () => {
      while (running) {
        await sleep(250);
        const m = await scrapeMetrics(up.metricsPort).catch(() => undefined);
        maxLoopDelayMs = Math.max(maxLoopDelayMs, (m?.get('nodejs_eventloop_lag_max_seconds') ?? 0) * 1000);
      }
    })();
    const health = healthProbe(up.port);
    await sleep(500);
    const from = Date.now();
    const cpu0 = cpuSeconds(pid);
    const first: number[] = [];
    const ends: string[] = [];
    for (let i = 0; i < watchers; i++) {
      const call = openTimedWatch(chans[i % connections]!, jobId, first, ends);
      calls.push(call);
    }
    const deadline = performance.now() + 120_000;
    while (first.length + ends.length < watchers && performance.now() < deadline) await sleep(100);
    await sleep(1000);
    running = false;
    const [maxHealthMs] = await Promise.all([health.stop(), scrape]);
    const to = Date.now();
    if (caseDir) window = { from, to };
    const cpuS = cpuSeconds(pid) - cpu0;
    for (const call of calls) call.cancel();
    await up.stop();
    let maxStallMs = 0;
    let maxStallRunMs = 0;
    let maxGcMs = 0;
    let maxStallGcMs = 0;
    const longGcs: [number, string][] = [];
    if (existsSync(probeFile)) {
      const probe = JSON.parse(readFileSync(probeFile, 'utf8')) as { stalls: [number, number, number, number][]; gc: [number, number, number][] };
      for (const [at, late, run] of probe.stalls) {
        if (at < from || at > to) continue;
        maxStallMs = Math.max(maxStallMs, late);
        if (Math.min(late, run) <= maxStallRunMs) continue;
        maxStallRunMs = Math.min(late, run);
        // The GC pauses that ended within that stall (it began late + one tick before its tick).
        maxStallGcMs = probe.gc.filter(([end]) => end > at - late - 5 && end <= at).reduce((a, [, ms]) => a + ms, 0);
      }
      for (const [at, ms, kind] of probe.gc) {
        if (at < from || at > to) continue;
        maxGcMs = Math.max(maxGcMs, ms);
        if (ms >= 50) longGcs.push([ms, GC_KINDS[kind] ?? String(kind)]);
      }
    }
    const ended: Record<string, number> = {};
    for (const e of ends) ended[e] = (ended[e] ?? 0) + 1;
    return {
      round,
      connections,
      callsPerTurn,
      load: loadAt,
      maxLoopDelayMs,
      maxStallMs,
      maxStallRunMs,
      maxStallGcMs,
      maxGcMs,
      longGcs,
      maxHealthMs,
      cpuS,
      firstEventMs: { p50: pct(first, 0.5), p99: pct(first, 0.99), max: first.length ? Math.max(...first) : NaN },
      got: first.length,
      ended,
    };
  } finally {
    for (const ch of chans) ch.close();
    c.close();
    await up.stop();
    if (caseDir && existsSync(probeFile) && window) {
      copyFileSync(probeFile, join(caseDir, 'probe.json'));
      const text = stallProfile(caseDir, window.from, window.to, 3);
      writeFileSync(join(caseDir, 'stalls.txt'), text);
      say(`${caseDir}:\n${text}`);
    }
    rmSync(probeFile, { force: true });
  }
}

const started = new Date().toISOString();
const loadBefore = load();
const results: Result[] = [];
for (let round = 1; round <= runs; round++) {
  for (const connections of connectionCounts) {
    for (const callsPerTurn of perTurns) {
      const r = await burst(round, connections, callsPerTurn);
      results.push(r);
      say(`round ${round}, ${connections} connections, calls per turn ${callsPerTurn}: ${JSON.stringify(r)}`);
    }
  }
}
const loadAfter = load();

const med = (xs: number[]): number => pct(xs, 0.5);
const rows = connectionCounts.flatMap((connections) =>
  perTurns.map((callsPerTurn) => {
    const rs = results.filter((r) => r.connections === connections && r.callsPerTurn === callsPerTurn);
    const pm = (f: (r: Result) => number, d = 0): string => `${fmt(med(rs.map(f)), d)} / ${fmt(Math.max(...rs.map(f)), d)}`;
    return [
      connections,
      callsPerTurn === 0 ? '0 (all at once)' : callsPerTurn,
      pm((r) => r.maxLoopDelayMs),
      pm((r) => r.maxStallRunMs),
      pm((r) => r.maxStallGcMs),
      pm((r) => r.maxStallMs),
      pm((r) => r.maxGcMs),
      pm((r) => r.maxHealthMs),
      pm((r) => r.firstEventMs.p50),
      pm((r) => r.cpuS, 2),
      `${Math.min(...rs.map((r) => r.got))} / ${watchers}`,
    ];
  }),
);
const cmd = `npx tsx bench/watch-burst.ts ${process.argv.slice(2).join(' ')}`.trim();
const md = [
  `# watch-burst (${label})`,
  '',
  `\`${cmd}\` on ${machine()}, ${started}; load average ${loadBefore} before, ${loadAfter} after; 2 cores shared with other work.`,
  '',
  `${watchers} WatchJob streams of one ${TASKS}-task job opened at once; p50 / max over ${runs} round(s), each case a fresh \`tarcil up\`, the cases in turn within a round.`,
  '',
  mdTable(
    [
      'connections',
      'calls per turn',
      'max event-loop delay ms',
      'most run in one stall ms',
      'GC in that stall ms',
      'longest stall ms',
      'longest GC ms',
      'max health round trip ms',
      'first event p50 ms',
      'server CPU s',
      'streams with an event (least)',
    ],
    rows,
  ),
  '',
  '## Each run',
  '',
  mdTable(
    [
      'round',
      'connections',
      'calls per turn',
      'load (1, 5, 15 min)',
      'max delay ms',
      'run in a stall ms',
      'GC in it ms',
      'stall ms',
      'GC ms',
      'health ms',
      'first event p50 / p99 / max ms',
      'CPU s',
      'ended with an error',
    ],
    results.map((r) => [
      r.round,
      r.connections,
      r.callsPerTurn,
      r.load,
      fmt(r.maxLoopDelayMs, 0),
      r.maxStallRunMs,
      r.maxStallGcMs,
      r.maxStallMs,
      r.maxGcMs,
      fmt(r.maxHealthMs, 0),
      `${fmt(r.firstEventMs.p50, 0)} / ${fmt(r.firstEventMs.p99, 0)} / ${fmt(r.firstEventMs.max, 0)}`,
      fmt(r.cpuS, 2),
      Object.entries(r.ended)
        .map(([k, v]) => `${v} × ${k}`)
        .join('; ') || '-',
    ]),
  ),
  '',
].join('\n');
say(md);
const paths = writeResults(
  label,
  { label, command: cmd, started, machine: machine(), watchers, runs, load: { before: loadBefore, after: loadAfter }, results },
  md,
  resultsDir(quick, 'watch-burst'),
);
say(`wrote ${paths.join(', ')}`);
