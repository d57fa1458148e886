/**
 * Hostile streams against a front-end: what slow readers and a crowd of watchers cost `tarcil up`
 * (the demo cell, embedded store) running in a child process. This process is the clients.
 *
 * Phase `slow` (the slow-reader combination): a 20,000-task job (tasks of 60 ms, so that it runs
 * for most of the window), then, 5 s after its submission,
 *  - 20 WatchJob streams whose reader never opens its HTTP/2 flow-control window: a raw
 *    `node:http2` client per stream with `settings: { initialWindowSize: 0 }`, sending a
 *    hand-framed gRPC request (1-byte compressed flag, 4-byte length, the WatchJobRequest encoded
 *    with protobufjs from the .proto);
 *  - 300 WatchJob streams of a gRPC client (grpc-js, 10 connections of 30) that never reads;
 *  - 5 requests whose body never ends (HEADERS and 3 bytes of the message) and 5 connections that
 *    open no stream at all;
 * all watched for `--seconds` (60). Then the unread gRPC streams start reading, and are given 5 s
 * to show how they end.
 *
 * Phase `base`: the same job and window with no hostile client: what the job alone costs.
 *
 * Phase `fanout`: a fresh child, a 20-task job whose tasks run for 10 minutes, and 10,000 WatchJob
 * streams of it opened at once over 10 connections; each stream's first event is timed.
 *
 * Phase `bare`: the same 10,000 streams against a gRPC server with nothing of tarcil in it
 * (bench/lib/bare-grpc-server.ts: one 3,000-byte message per stream), in a child process too:
 * what grpc-js and Node's HTTP/2 cost by themselves on this machine, under the same client.
 *
 * Measured on the child: RSS (/proc VmRSS every 200 ms and its peak VmHWM), the V8 heap and the
 * longest event-loop delay from its /metrics (prom-client's monitorEventLoopDelay, read and reset
 * every 500 ms), the longest round trip of a health check sent every 100 ms on a connection of
 * its own, its CPU time, and its stalls told apart by cause (bench/lib/stall-probe.mjs, preloaded):
 * the longest stall in which the child worked (as much CPU as delay) rather than waited for a core
 * held by other processes.
 *
 * Run: npx tsx bench/hostile-streams.ts [--phase slow|base|fanout|bare|all] [--seconds 60]
 *        [--watchers 10000] [--connections 10] [--batch N --batch-gap-ms M] [--label after] [--quick]
 *        [--node-args '--cpu-prof']
 * Writes bench/results/hostile-streams/hostile-streams-<label>.{json,md} (bench/results/quick/ with --quick).
 */
import * as grpc from '@grpc/grpc-js';
import http2 from 'node:http2';
import { existsSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { clientConstructor, protoRoot } from '../src/rpc/proto-root.ts';
import type { SchedulerClient } from '../src/rpc/gen/tarcil/v1/Scheduler.ts';
import { openTimedWatch, type WatchCall } from './lib/first-event.ts';
import { cpuSeconds, scrapeMetrics } from './lib/proc-stats.ts';
import { fmt, machine, mdTable, pct, resultsDir, writeResults } from './lib/report.ts';
import { startUp, type UpProcess } from './lib/up.ts';
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';

function arg(name: string): string | undefined {
  const i = process.argv.indexOf(name);
  return i >= 0 ? process.argv[i + 1] : undefined;
}
const quick = process.argv.includes('--quick');
const phase = arg('--phase') ?? 'all';
const seconds = Number(arg('--seconds') ?? (quick ? 15 : 60));
const watchers = Number(arg('--watchers') ?? (quick ? 2000 : 10_000));
const connections = Number(arg('--connections') ?? 10);
/** Open the watchers in batches of this many, --batch-gap-ms apart (default: all in one go). */
const batch = Number(arg('--batch') ?? 0) || watchers;
const batchGapMs = Number(arg('--batch-gap-ms') ?? 0);
const label = arg('--label') ?? 'run';
/** Node flags for the child, e.g. "--cpu-prof --cpu-prof-dir=/tmp/prof". */
const nodeArgs = (arg('--node-args') ?? '').split(' ').filter(Boolean);
if (!['slow', 'base', 'fanout', 'bare', 'all'].includes(phase)) throw new Error('--phase: slow, base, fanout, bare or all');

const SLOW_TASKS = 20_000;
const SLOW_TASK_MS = 60;
const WINDOW0_STREAMS = 20;
const UNREAD_STREAMS = 300;
const UNREAD_CONNECTIONS = 10;
const PARTIAL_BODIES = 5;
const IDLE_CONNECTIONS = 5;
const FANOUT_TASKS = 20;

// The child always runs the TypeScript sources of this tree, never a stale build.
process.env.TARCIL_FROM_SOURCE = '1';

const say = (m: string): void => {
  process.stdout.write(`${m}\n`);
};
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** A Scheduler client on a connection of its own (grpc-js otherwise shares one among equal channels). */
function client(port: number): SchedulerClient {
  return new (clientConstructor('tarcil.v1.Scheduler'))(`127.0.0.1:${port}`, grpc.credentials.createInsecure(), {
    'grpc.use_local_subchannel_pool': 1,
    'grpc.max_receive_message_length': 64 * 2 ** 20,
  }) as unknown as SchedulerClient;
}

function unary<T>(f: (opts: grpc.CallOptions, cb: (err: grpc.ServiceError | null, v?: T) => void) => void, ms = 30_000): Promise<T> {
  return new Promise((resolve, reject) => f({ deadline: Date.now() + ms }, (err, v) => (err ? reject(err) : resolve(v as T))));
}

// ---------------------------------------------------------------------------------------------
// What the child costs, sampled while a phase runs.

interface Watch {
  /** CPU seconds the child used meanwhile (user + system). */
  cpuS: number;
  /** The stall probe: the longest stall, and the longest part of a stall the child spent working. */
  probeMaxStallMs: number;
  probeMaxBusyMs: number;
  peakRssMb: number;
  hwmMb: number;
  peakHeapUsedMb: number;
  peakHeapTotalMb: number;
  maxLoopDelayMs: number;
  maxProbeMs: number;
  probeFailures: number;
  rssEndMb: number;
}

function readStatus(pid: number): { rss: number; hwm: number } {
  try {
    const s = readFileSync(`/proc/${pid}/status`, 'utf8');
    const kb = (k: string): number => Number(new RegExp(`${k}:\\s+(\\d+) kB`).exec(s)?.[1] ?? 0) / 1024;
    return { rss: kb('VmRSS'), hwm: kb('VmHWM') };
  } catch {
    return { rss: 0, hwm: 0 };
  }
}

const Health = grpc.makeGenericClientConstructor(
  {
    Check: {
      path: '/grpc.health.v1.Health/Check',
      requestStream: false,
      responseStream: false,
      requestSerialize: () => Buffer.alloc(0),
      requestDeserialize: (b: Buffer) => b,
      responseSerialize: (b: Buffer) => b,
      responseDeserialize: (b: Buffer) => b,
    },
  },
  'Health',
);

type Child = Pick<UpProcess, 'proc' | 'port' | 'metricsPort' | 'stop'>;

const PROBE = fileURLToPath(new URL('./lib/stall-probe.mjs', import.meta.url));
/** The child's stall-probe file, and the window whose stalls go into which figures. */
const probeFiles = new Map<Child, string>();
const probeWindows = new Map<Child, [number, number, Watch]>();

/** Node flags and environment of a child with the stall probe. */
function probed(): { args: string[]; file: string } {
  const file = join(tmpdir(), `hostile-streams-stalls-${process.pid}-${probeFiles.size}-${Date.now()}.json`);
  process.env.STALL_PROBE_OUT = file;
  return { args: [...nodeArgs, '--import', PROBE], file };
}

/** Once `c` has exited: its stalls within the window watched go into that window's figures. */
function readProbe(c: Child): void {
  const file = probeFiles.get(c);
  const win = probeWindows.get(c);
  if (!file || !win || !existsSync(file)) return;
  const [from, to, w] = win;
  for (const [at, late, cpu] of JSON.parse(readFileSync(file, 'utf8')) as [number, number, number][]) {
    if (at < from || at > to) continue;
    w.probeMaxStallMs = Math.max(w.probeMaxStallMs, late);
    w.probeMaxBusyMs = Math.max(w.probeMaxBusyMs, Math.min(late, cpu));
  }
  rmSync(file, { force: true });
}

async function startProbed(bare: boolean): Promise<Child> {
  const { args, file } = probed();
  const c = bare ? await startBare(args) : await startUp([], args);
  probeFiles.set(c, file);
  return c;
}

async function stopProbed(c: Child): Promise<void> {
  await c.stop();
  readProbe(c);
}

/** bench/lib/bare-grpc-server.ts in a child process. */
async function startBare(args: string[]): Promise<Child> {
  const file = fileURLToPath(new URL('./lib/bare-grpc-server.ts', import.meta.url));
  const proc = spawn(process.execPath, [...args, '--import', 'tsx', file], { stdio: ['ignore', 'pipe', 'inherit'] });
  const [port, metricsPort] = await new Promise<[number, number]>((resolve, reject) => {
    let out = '';
    proc.stdout.on('data', (b: Buffer) => {
      out += b.toString();
      const m = /port (\d+) metrics (\d+)/.exec(out);
      if (m) resolve([Number(m[1]), Number(m[2])]);
    });
    proc.on('exit', (code) => reject(new Error(`the bare server exited ${code}`)));
  });
  return {
    proc,
    port,
    metricsPort,
    stop: async () => {
      if (proc.exitCode !== null) return;
      proc.kill('SIGTERM');
      await new Promise((r) => proc.once('exit', r));
    },
  };
}

/** Samples the child until stop() (which resolves with the figures). */
function watchChild(up: Child): { stop(): Promise<Watch> } {
  const pid = up.proc.pid as number;
  const cpu0 = cpuSeconds(pid);
  const from = Date.now();
  const w: Watch = {
    cpuS: 0,
    probeMaxStallMs: 0,
    probeMaxBusyMs: 0,
    peakRssMb: 0,
    hwmMb: 0,
    peakHeapUsedMb: 0,
    peakHeapTotalMb: 0,
    maxLoopDelayMs: 0,
    maxProbeMs: 0,
    probeFailures: 0,
    rssEndMb: 0,
  };
  let running = true;
  const rss = setInterval(() => {
    const s = readStatus(pid);
    w.peakRssMb = Math.max(w.peakRssMb, s.rss);
    w.hwmMb = Math.max(w.hwmMb, s.hwm);
  }, 200);
  const scrape = async (): Promise<void> => {
    // The first read resets the child's histogram: what came before (its start) is not counted.
    await scrapeMetrics(up.metricsPort).catch(() => undefined);
    await sleep(500);
    while (running) {
      try {
        const m = await scrapeMetrics(up.metricsPort);
        w.peakHeapUsedMb = Math.max(w.peakHeapUsedMb, (m.get('nodejs_heap_size_used_bytes') ?? 0) / 2 ** 20);
        w.peakHeapTotalMb = Math.max(w.peakHeapTotalMb, (m.get('nodejs_heap_size_total_bytes') ?? 0) / 2 ** 20);
        w.maxLoopDelayMs = Math.max(w.maxLoopDelayMs, (m.get('nodejs_eventloop_lag_max_seconds') ?? 0) * 1000);
      } catch {
        // The child is busy or gone: the probe and the RSS say which.
      }
      await sleep(500);
    }
  };
  const health = new Health(`127.0.0.1:${up.port}`, grpc.credentials.createInsecure(), { 'grpc.use_local_subchannel_pool': 1 });
  const probe = async (): Promise<void> => {
    while (running) {
      const t0 = performance.now();
      try {
        await new Promise<void>((resolve, reject) =>
          (health as unknown as { Check(req: Buffer, o: grpc.CallOptions, cb: (e: Error | null) => void): void }).Check(
            Buffer.alloc(0),
            { deadline: Date.now() + 30_000 },
            (e) => (e ? reject(e) : resolve()),
          ),
        );
      } catch {
        w.probeFailures++;
      }
      w.maxProbeMs = Math.max(w.maxProbeMs, performance.now() - t0);
      await sleep(100);
    }
  };
  const loops = Promise.all([scrape(), probe()]);
  return {
    stop: async () => {
      running = false;
      clearInterval(rss);
      await loops;
      health.close();
      w.rssEndMb = readStatus(pid).rss;
      w.cpuS = cpuSeconds(pid) - cpu0;
      probeWindows.set(up, [from, Date.now(), w]);
      w.hwmMb = Math.max(w.hwmMb, readStatus(pid).hwm);
      return w;
    },
  };
}

// ---------------------------------------------------------------------------------------------
// Raw HTTP/2 clients: a reader that never opens its window, a body that never ends, a connection
// that opens nothing.

/** The WatchJob request for `jobId` as a gRPC message on the wire: flag, length, protobuf. */
function watchFrame(jobId: string): Buffer {
  const type = protoRoot().lookupType('tarcil.v1.WatchJobRequest');
  const body = type.encode(type.fromObject({ jobId })).finish();
  const frame = Buffer.alloc(5 + body.length);
  frame.writeUInt8(0, 0);
  frame.writeUInt32BE(body.length, 1);
  Buffer.from(body).copy(frame, 5);
  return frame;
}

const RST_NAMES = new Map(
  Object.entries(http2.constants)
    .filter(
      ([k]) =>
        k.startsWith('NGHTTP2_') &&
        /NO_ERROR|PROTOCOL_ERROR|INTERNAL_ERROR|FLOW_CONTROL_ERROR|STREAM_CLOSED|REFUSED_STREAM|CANCEL|ENHANCE_YOUR_CALM|FRAME_SIZE_ERROR|SETTINGS_TIMEOUT|COMPRESSION_ERROR|CONNECT_ERROR|INADEQUATE_SECURITY|HTTP_1_1_REQUIRED/.test(
          k,
        ),
    )
    .map(([k, v]) => [v as number, k.slice(8)]),
);

interface RawStream {
  /** How it ended, as the client saw it: 'trailers <grpc-status>', 'rst <code>', 'goaway', or 'open'. */
  end(): string;
  endedAtMs(): number | undefined;
  close(): void;
}

function rawStream(port: number, body: Buffer | undefined, window0: boolean): RawStream {
  const t0 = performance.now();
  let ended: string | undefined;
  let at: number | undefined;
  const mark = (s: string): void => {
    if (ended !== undefined) return;
    ended = s;
    at = performance.now() - t0;
  };
  const session = http2.connect(`http://127.0.0.1:${port}`, window0 ? { settings: { initialWindowSize: 0 } } : {});
  session.on('error', () => undefined);
  session.on('goaway', (code: number) => mark(`goaway ${RST_NAMES.get(code) ?? code}`));
  session.on('close', () => mark('connection closed'));
  if (body !== undefined) {
    const req = session.request(
      { ':method': 'POST', ':path': '/tarcil.v1.Scheduler/WatchJob', 'content-type': 'application/grpc', te: 'trailers' },
      { endStream: false },
    );
    req.on('error', () => undefined);
    req.on('response', (h) => {
      if (h['grpc-status'] !== undefined) mark(`trailers ${String(h['grpc-status'])}`);
    });
    req.on('trailers', (t: http2.IncomingHttpHeaders) => mark(`trailers ${String(t['grpc-status'])}`));
    req.on('close', () => mark(`rst ${RST_NAMES.get(req.rstCode ?? -1) ?? req.rstCode}`));
    if (body.length >= 5) req.end(body);
    else req.write(body);
  }
  return {
    end: () => ended ?? 'open',
    endedAtMs: () => at,
    close: () => session.destroy(),
  };
}

// ---------------------------------------------------------------------------------------------

interface SlowResult {
  seconds: number;
  watch: Watch;
  window0: Record<string, number>;
  window0EndedS: number[];
  unreadWhileUnread: Record<string, number>;
  unreadAfterReading: Record<string, number>;
  partialBodies: Record<string, number>;
  idleConnections: Record<string, number>;
  jobState: string;
}

function tally(xs: string[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const x of xs) out[x] = (out[x] ?? 0) + 1;
  return out;
}

function codeName(code: number | undefined): string {
  return code === undefined ? '?' : (grpc.status[code] ?? String(code));
}

/** The slow-reader phase; with `hostile` false, the same job and window with no hostile client (the baseline). */
async function slowPhase(hostile: boolean): Promise<SlowResult> {
  const up = await startProbed(false);
  try {
    const c = client(up.port);
    const spec = { name: 'hostile', profile: 'spark-lr', tasks: SLOW_TASKS, durationMs: SLOW_TASK_MS, maxQueueMs: 0, mode: 'incremental' };
    const { jobId } = await unary<{ jobId: string }>((o, cb) => c.SubmitJob({ specJson: JSON.stringify(spec) }, o, cb), 120_000);
    say(`slow: job ${jobId} (${SLOW_TASKS} tasks of ${SLOW_TASK_MS} ms) submitted; streams open in 5 s`);
    await sleep(5000);
    const w = watchChild(up);
    const frame = watchFrame(jobId);
    const n = (k: number): number => (hostile ? k : 0);
    const window0 = Array.from({ length: n(WINDOW0_STREAMS) }, () => rawStream(up.port, frame, true));
    const partial = Array.from({ length: n(PARTIAL_BODIES) }, () => rawStream(up.port, frame.subarray(0, 3), false));
    const idle = Array.from({ length: n(IDLE_CONNECTIONS) }, () => rawStream(up.port, undefined, false));
    const chans = Array.from({ length: UNREAD_CONNECTIONS }, () => client(up.port));
    const unread = Array.from({ length: n(UNREAD_STREAMS) }, (_, i) => {
      const call = chans[i % chans.length]!.WatchJob({ jobId });
      const s: { call: typeof call; status?: number; details?: string } = { call };
      call.on('status', (st: grpc.StatusObject) => {
        s.status ??= st.code;
        s.details ??= st.details;
      });
      call.on('error', (e: grpc.ServiceError) => {
        s.status ??= e.code;
        s.details ??= e.details;
      });
      return s;
    });
    const t0 = performance.now();
    for (let i = 1; i <= seconds / 10; i++) {
      await sleep(10_000);
      const s = readStatus(up.proc.pid as number);
      say(
        `slow: +${Math.round((performance.now() - t0) / 1000)} s  RSS ${fmt(s.rss, 0)} MB (peak ${fmt(s.hwm, 0)})  window-0 streams ended ${window0.filter((r) => r.end() !== 'open').length}/${WINDOW0_STREAMS}  unread ended ${unread.filter((u) => u.status !== undefined).length}/${UNREAD_STREAMS}`,
      );
    }
    await sleep(Math.max(0, seconds * 1000 - (performance.now() - t0)));
    const watch = await w.stop();
    const whileUnread = unread.map((u) => (u.status === undefined ? 'open' : codeName(u.status)));
    // Now read: what was queued comes, then the status if the server ended the stream.
    for (const u of unread) u.call.on('data', () => undefined);
    await sleep(5000);
    const afterReading = unread.map((u) => (u.status === undefined ? 'open (events flowing)' : `${codeName(u.status)} (${(u.details ?? '').slice(0, 60)})`));
    const job = await unary<{ state: string }>((o, cb) => c.GetJob({ jobId, taskLimit: 1 }, o, cb)).catch(() => ({ state: '?' }));
    const out: SlowResult = {
      seconds,
      watch,
      window0: tally(window0.map((r) => r.end())),
      window0EndedS: window0
        .map((r) => r.endedAtMs())
        .filter((x): x is number => x !== undefined)
        .map((x) => x / 1000),
      unreadWhileUnread: tally(whileUnread),
      unreadAfterReading: tally(afterReading),
      partialBodies: tally(partial.map((r) => r.end())),
      idleConnections: tally(idle.map((r) => r.end())),
      jobState: job.state,
    };
    for (const u of unread) u.call.cancel();
    for (const r of [...window0, ...partial, ...idle]) r.close();
    for (const ch of chans) ch.close();
    c.close();
    return out;
  } finally {
    await stopProbed(up);
  }
}

interface FanoutResult {
  watchers: number;
  connections: number;
  watch: Watch;
  firstEventMs: { p50: number; p99: number; max: number };
  batch: number;
  batchGapMs: number;
  got: number;
  ended: Record<string, number>;
  openMs: number;
}

async function fanoutPhase(bare: boolean): Promise<FanoutResult> {
  const up = await startProbed(bare);
  try {
    const c = client(up.port);
    let jobId = 'bare';
    if (!bare) {
      const spec = { name: 'watched', profile: 'spark-lr', tasks: FANOUT_TASKS, durationMs: 600_000, maxQueueMs: 0, mode: 'incremental' };
      jobId = (await unary<{ jobId: string }>((o, cb) => c.SubmitJob({ specJson: JSON.stringify(spec) }, o, cb))).jobId;
      for (let i = 0; i < 100; i++) {
        const j = await unary<{ state: string }>((o, cb) => c.GetJob({ jobId, taskLimit: 1 }, o, cb));
        if (j.state === 'running') break;
        await sleep(100);
      }
    }
    const chans = Array.from({ length: connections }, () => client(up.port));
    // Connect first, so that the streams go out at once.
    await Promise.all(chans.map((ch) => new Promise<void>((resolve, reject) => ch.waitForReady(Date.now() + 10_000, (e) => (e ? reject(e) : resolve())))));
    await sleep(1000);
    const w = watchChild(up);
    await sleep(1500);
    say(`${bare ? 'bare' : 'fanout'}: job ${jobId}; opening ${watchers} WatchJob streams over ${connections} connections`);
    const first: number[] = [];
    const ends: string[] = [];
    const t0 = performance.now();
    const calls: WatchCall[] = [];
    const open = (i: number): WatchCall => openTimedWatch(chans[i % chans.length]!, jobId, first, ends);
    for (let i = 0; i < watchers; i++) {
      if (i > 0 && i % batch === 0) await sleep(batchGapMs);
      calls.push(open(i));
    }
    const openMs = performance.now() - t0;
    const deadline = performance.now() + 120_000;
    while (first.length + ends.length < watchers && performance.now() < deadline) await sleep(100);
    await sleep(2000);
    const watch = await w.stop();
    const out: FanoutResult = {
      watchers,
      connections,
      watch,
      firstEventMs: { p50: pct(first, 0.5), p99: pct(first, 0.99), max: Math.max(...first) },
      got: first.length,
      batch,
      batchGapMs,
      ended: tally(ends),
      openMs,
    };
    for (const call of calls) call.cancel();
    for (const ch of chans) ch.close();
    c.close();
    return out;
  } finally {
    await stopProbed(up);
  }
}

const load = (): string => readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ');

const started = new Date().toISOString();
const loadBefore = load();
const slow = phase === 'slow' || phase === 'all' ? await slowPhase(true) : undefined;
if (slow) say(`slow: ${JSON.stringify(slow)}`);
const base = phase === 'base' || phase === 'all' ? await slowPhase(false) : undefined;
if (base) say(`base: ${JSON.stringify(base)}`);
const fanout = phase === 'fanout' || phase === 'all' ? await fanoutPhase(false) : undefined;
if (fanout) say(`fanout: ${JSON.stringify(fanout)}`);
const bare = phase === 'bare' || phase === 'all' ? await fanoutPhase(true) : undefined;
if (bare) say(`bare: ${JSON.stringify(bare)}`);
const loadAfter = load();

const ends = (r: Record<string, number>): string =>
  Object.entries(r)
    .map(([k, v]) => `${v} ${k}`)
    .join(', ');
const fanoutTable = (f: FanoutResult): string =>
  mdTable(
    [
      'max event-loop delay ms',
      'longest stall working / any ms',
      'max health round trip ms',
      'first event p50 / p99 / max ms',
      'streams with an event',
      'server CPU s',
      'peak RSS MB',
      'peak V8 heap used MB',
    ],
    [
      [
        fmt(f.watch.maxLoopDelayMs, 0),
        `${fmt(f.watch.probeMaxBusyMs, 0)} / ${fmt(f.watch.probeMaxStallMs, 0)}`,
        fmt(f.watch.maxProbeMs, 0),
        `${fmt(f.firstEventMs.p50, 0)} / ${fmt(f.firstEventMs.p99, 0)} / ${fmt(f.firstEventMs.max, 0)}`,
        `${f.got} / ${f.watchers}`,
        fmt(f.watch.cpuS, 1),
        fmt(f.watch.hwmMb, 0),
        fmt(f.watch.peakHeapUsedMb, 0),
      ],
    ],
  );
const md: string[] = [
  `# hostile-streams (${label})`,
  '',
  `\`npx tsx bench/hostile-streams.ts ${process.argv.slice(2).join(' ')}\` on ${machine()}, ${started}; load average ${loadBefore} before, ${loadAfter} after.`,
  '',
];
if (slow) {
  md.push(
    `## slow readers: ${WINDOW0_STREAMS} window-0 streams + ${UNREAD_STREAMS} unread streams on a ${SLOW_TASKS}-task job, ${slow.seconds} s`,
    '',
    mdTable(
      [
        'peak RSS MB (VmHWM)',
        'RSS at the end MB',
        'peak V8 heap used / total MB',
        'max event-loop delay ms',
        'longest stall working / any ms',
        'max health round trip ms',
        'CPU s',
      ],
      [
        [
          fmt(slow.watch.hwmMb, 0),
          fmt(slow.watch.rssEndMb, 0),
          `${fmt(slow.watch.peakHeapUsedMb, 0)} / ${fmt(slow.watch.peakHeapTotalMb, 0)}`,
          fmt(slow.watch.maxLoopDelayMs, 0),
          `${fmt(slow.watch.probeMaxBusyMs, 0)} / ${fmt(slow.watch.probeMaxStallMs, 0)}`,
          fmt(slow.watch.maxProbeMs, 0),
          fmt(slow.watch.cpuS, 1),
        ],
      ],
    ),
    '',
    `- window-0 streams: ${ends(slow.window0)}${slow.window0EndedS.length ? ` (ended after ${fmt(Math.min(...slow.window0EndedS))}–${fmt(Math.max(...slow.window0EndedS))} s)` : ''}`,
    `- unread gRPC streams, status seen without reading: ${ends(slow.unreadWhileUnread)}; after reading for 5 s: ${ends(slow.unreadAfterReading)}`,
    `- requests whose body never ends: ${ends(slow.partialBodies)}; connections with no stream: ${ends(slow.idleConnections)}`,
    `- the job at the end: ${slow.jobState}`,
    '',
  );
}
if (base) {
  md.push(
    `## the same job and window with no hostile client (baseline)`,
    '',
    mdTable(
      [
        'peak RSS MB (VmHWM)',
        'RSS at the end MB',
        'peak V8 heap used / total MB',
        'max event-loop delay ms',
        'longest stall working / any ms',
        'max health round trip ms',
        'CPU s',
      ],
      [
        [
          fmt(base.watch.hwmMb, 0),
          fmt(base.watch.rssEndMb, 0),
          `${fmt(base.watch.peakHeapUsedMb, 0)} / ${fmt(base.watch.peakHeapTotalMb, 0)}`,
          fmt(base.watch.maxLoopDelayMs, 0),
          `${fmt(base.watch.probeMaxBusyMs, 0)} / ${fmt(base.watch.probeMaxStallMs, 0)}`,
          fmt(base.watch.maxProbeMs, 0),
          fmt(base.watch.cpuS, 1),
        ],
      ],
    ),
    '',
  );
}
if (fanout) {
  md.push(
    `## ${fanout.watchers} WatchJob streams of one ${FANOUT_TASKS}-task job opened ${fanout.batch >= fanout.watchers ? 'at once' : `${fanout.batch} at a time, ${fanout.batchGapMs} ms apart,`} over ${fanout.connections} connections`,
    '',
    fanoutTable(fanout),
    '',
    Object.keys(fanout.ended).length ? `- ended with an error: ${ends(fanout.ended)}` : '- no stream ended with an error',
    '',
  );
}
if (bare) {
  md.push(`## The same ${bare.watchers} streams against a bare grpc-js server (bench/lib/bare-grpc-server.ts)`, '', fanoutTable(bare), '');
}
const text = md.join('\n');
say(text);
const paths = writeResults(
  `hostile-streams-${label}`,
  { label, started, load: { before: loadBefore, after: loadAfter }, slow, base, fanout, bare },
  text,
  resultsDir(quick, 'hostile-streams'),
);
say(`wrote ${paths.join(', ')}`);
process.exit(0);
