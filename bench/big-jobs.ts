/**
 * Big jobs on `tarcil up`: what a job of 10,000 to 100,000 tasks does to the process that runs the
 * front-end. The front-end runs as `tarcil up` starts it (the demo cell's 10 monitors with the
 * simulated executor, 24 RUs, 3 agents, leases of 5 s, all in one process on the embedded store,
 * or on a private etcd with --store etcd) in a child process with a bounded heap, so that running
 * out of memory is a result and not the end of the benchmark. That child measures itself: the
 * event-loop delay (perf_hooks.monitorEventLoopDelay, 2 ms resolution), memory every 100 ms,
 * stalls of the 100 ms sampler, and whether any lease was lost (monitor re-registrations and
 * fences, the front-end's fenced owner leases). This process is the clients: it submits, keeps k
 * WatchJob streams open per job (each on its own connection, counting events and bytes as they
 * arrive, whatever the server sends), polls the job's state, and cancels what is still running
 * when a case's time is up.
 *
 * Cases: incremental jobs of 10,000 / 30,000 / 100,000 tasks of 20 ms with 1 and 10 watchers;
 * gangs of 24 tasks (the whole cell) and of 10,000 (can never fit); cancelling a running
 * 100,000-task job. Each case runs in a fresh child and is bounded in time.
 *
 * Run: npx tsx bench/big-jobs.ts [--quick] [--store memory|etcd] [--only inc-30k-k1,gang-10k]
 *        [--heap-mb 2048] [--hard-s S] [--name big-jobs] [--cpu-prof] [--heap-snapshot S]
 * --watchers K overrides every case's number of watchers. --hard-s: a case's child is killed after S seconds (default: the case bounds + 30 s).
 * --cpu-prof profiles the child (node --cpu-prof), leaves its job running at the bound (no cancel)
 * and prints the front-end's top self-time functions. --heap-snapshot S writes a heap snapshot of
 * the front-end S seconds into each case (v8.writeHeapSnapshot: it blocks the process meanwhile).
 */
import * as grpc from '@grpc/grpc-js';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { constants, monitorEventLoopDelay, PerformanceObserver } from 'node:perf_hooks';
import { writeHeapSnapshot } from 'node:v8';
import type { Job__Output } from '../src/rpc/gen/tarcil/v1/Job.ts';
import { loadProtos } from '../src/rpc/proto.ts';
import { expandCluster, loadCatalog, resolveCluster } from '../src/model/catalog.ts';
import { startScheduler } from '../src/frontend/runtime.ts';
import { startMonitor, type MonitorProcess } from '../src/node/runtime.ts';
import { openStore } from '../src/store/index.ts';
import { Keys } from '../src/state/keys.ts';
import { SystemClock } from '../src/util/clock.ts';
import { createLogger } from '../src/util/log.ts';
import { SeededRng } from '../src/util/rng.ts';
import { ensureEtcd, startEtcd, type EtcdProcess } from '../test/support/etcd.ts';
import { fmt, machine, mdTable, resultsDir, writeResults } from './lib/report.ts';

const SELF = fileURLToPath(import.meta.url);
/** What `tarcil up` uses (src/cli/live.ts): 3 agents, 5 s leases for the monitors and the front-end. */
const UP_AGENTS = 3;
const UP_LEASE_TTL_S = 5;
const ELD_RESOLUTION_MS = 2;
const SAMPLE_MS = 100;
const TASK_MS = 20;
const PROFILE = 'spark-lr';
/** Sampling interval of a profiled front-end (--cpu-prof): fine enough to see 50 ms stretches. */
const PROF_INTERVAL_US = 250;

// ---------------------------------------------------------------------------------------------
// Child: the `tarcil up` process, measuring itself.

interface ChildConfig {
  store: string;
  prefix: string;
  /** On `exit`, exit without closing anything (a profiled front-end writes its profile then). */
  exitAtOnce?: boolean;
  /** Write a heap snapshot this long after `begin` (ms), into heapSnapshotDir. */
  heapSnapshotAtMs?: number;
  heapSnapshotDir?: string;
}

interface ChildSummary {
  /** Since the parent said `begin`. */
  ms: number;
  eld: { p50: number; p99: number; max: number; mean: number; count: number };
  /** The 100 ms sampler: longest gap beyond its period, and the total of gaps > 100 ms beyond it. */
  longestStallMs: number;
  stalledMs: number;
  /** Garbage collection (PerformanceObserver 'gc'): the longest pause, and pauses over 50 ms. */
  gcMaxMs: number;
  gcOver50: number;
  /** Pauses by kind (minor: scavenge, major: mark-compact, incremental: a marking step, weakcb). */
  gcByKind: Record<string, { count: number; totalMs: number; maxMs: number }>;
  /** The longest pause: its kind, and the heap in use at the sample before it. */
  gcLongest: { ms: number; kind: string; heapMb: number } | undefined;
  /**
   * The longest stalls (a 5 ms timer late by more than STALL_MS), each split by what the main
   * thread did meanwhile (Linux schedstat): on the CPU, in garbage collection pauses (which it
   * spends on the CPU or waiting for the collector's helper threads), or runnable but waiting for
   * a CPU that other processes held. `jsMs` is the CPU time outside collection: the stall's own
   * synchronous work.
   */
  stalls: Stall[];
  stallCount: number;
  /** The stall with the most JS time. */
  jsStall: Stall | undefined;
  peakRssMb: number;
  peakHeapMb: number;
  peakExternalMb: number;
  rssMb: number;
  heapMb: number;
  cpuSeconds: number;
  /** True when the front-end died or was killed: its last summary (sent each second) before that. */
  partial?: boolean;
  monitors: { registrations: number; fenced: number; killed: number; lost: number; leaseChanges: number };
  frontEnd: { fencedLeases: number; leaseChanged: boolean; adopted: number; lost: number };
}

interface Stall {
  /** ms since `begin`. */
  at: number;
  ms: number;
  cpuMs: number;
  gcMs: number;
  waitCpuMs: number;
  jsMs: number;
}

/** A stall is a probe timer late by more than this. */
const STALL_MS = 50;
const PROBE_MS = 5;

type ToChild = { type: 'begin' } | { type: 'report' } | { type: 'exit' };
type FromChild =
  | { type: 'ready'; port: number; metricsPort: number | undefined; rus: number; servers: number }
  | { type: 'sample'; t: number; rssMb: number; heapMb: number; eldMaxMs: number; summary: ChildSummary }
  | { type: 'report'; summary: ChildSummary };

async function childMain(cfg: ChildConfig): Promise<void> {
  const eld = monitorEventLoopDelay({ resolution: ELD_RESOLUTION_MS });
  eld.enable();
  const gc = { max: 0, over50: 0, byKind: {} as ChildSummary['gcByKind'], longest: undefined as ChildSummary['gcLongest'] };
  const gcKinds: Record<number, string> = {
    [constants.NODE_PERFORMANCE_GC_MINOR]: 'minor',
    [constants.NODE_PERFORMANCE_GC_MAJOR]: 'major',
    [constants.NODE_PERFORMANCE_GC_INCREMENTAL]: 'incremental',
    [constants.NODE_PERFORMANCE_GC_WEAKCB]: 'weakcb',
  };
  let heapNowMb = 0;
  const gcPauses: { start: number; end: number }[] = [];
  new PerformanceObserver((list) => {
    for (const e of list.getEntries()) {
      if (e.duration >= 1) gcPauses.push({ start: e.startTime, end: e.startTime + e.duration });
      const kind = gcKinds[(e as unknown as { detail?: { kind?: number } }).detail?.kind ?? 0] ?? 'other';
      const k = (gc.byKind[kind] ??= { count: 0, totalMs: 0, maxMs: 0 });
      k.count++;
      k.totalMs += e.duration;
      k.maxMs = Math.max(k.maxMs, e.duration);
      if (e.duration > gc.max) {
        gc.max = e.duration;
        gc.longest = { ms: e.duration, kind, heapMb: heapNowMb };
      }
      if (e.duration > 50) gc.over50++;
    }
  }).observe({ entryTypes: ['gc'] });
  const log = createLogger('tarcil', process.env.TARCIL_LOG ?? 'warn');
  const catalog = loadCatalog();
  const servers = expandCluster(resolveCluster('demo', catalog), catalog.platforms);
  const store = await openStore(cfg.store);
  const keys = new Keys(cfg.prefix);
  const clock = new SystemClock();
  const monitors: MonitorProcess[] = [];
  for (const s of servers) {
    monitors.push(
      await startMonitor({ store, keys, clock, log, server: s, executor: 'simulated', host: '127.0.0.1', port: 0, leaseTtlSeconds: UP_LEASE_TTL_S }),
    );
  }
  const sched = await startScheduler({
    name: `up-${process.pid}`,
    store,
    keys,
    catalog,
    clock,
    rng: new SeededRng(1),
    log,
    agents: UP_AGENTS,
    host: '127.0.0.1',
    port: 0,
    leaseTtlSeconds: UP_LEASE_TTL_S,
    metricsPort: 0,
  });
  const send = (m: FromChild): void => {
    process.send?.(m);
  };

  let begun = performance.now();
  let cpu0 = process.cpuUsage();
  const mb = (b: number): number => b / 2 ** 20;
  let peak = { rss: 0, heap: 0, ext: 0 };
  let last = { rss: 0, heap: 0 };
  let longestStall = 0;
  let stalled = 0;
  let lastTick = performance.now();
  let secondMax = 0;
  let secondStart = performance.now();
  const leases0 = monitors.map((m) => m.monitor.leaseId);
  const regs0 = monitors.reduce((a, m) => a + m.monitor.stats.registrations, 0);
  const monitorStats0 = (k: 'fenced' | 'killed' | 'lost'): number => monitors.reduce((a, m) => a + m.monitor.stats[k], 0);
  const base = { fenced: monitorStats0('fenced'), killed: monitorStats0('killed'), lost: monitorStats0('lost') };
  const feLease0 = sched.manager.leaseId;
  const fe0 = { ...sched.manager.stats };

  // Stalls, and what the main thread did during each: its on-CPU and runqueue-wait nanoseconds.
  const schedFile = `/proc/${process.pid}/task/${process.pid}/schedstat`;
  const schedstat = (): { run: number; wait: number } | undefined => {
    try {
      const [run, wait] = readFileSync(schedFile, 'utf8').split(' ').map(Number);
      return { run: (run ?? 0) / 1e6, wait: (wait ?? 0) / 1e6 };
    } catch {
      return undefined; // not Linux
    }
  };
  const rawStalls: { start: number; end: number; cpuMs: number; waitCpuMs: number }[] = [];
  let probeAt = performance.now();
  let probeSched = schedstat();
  const probe = setInterval(() => {
    const now = performance.now();
    const s = schedstat();
    if (now - probeAt - PROBE_MS > STALL_MS) {
      rawStalls.push({
        start: probeAt + PROBE_MS,
        end: now,
        cpuMs: s && probeSched ? s.run - probeSched.run : NaN,
        waitCpuMs: s && probeSched ? s.wait - probeSched.wait : NaN,
      });
    }
    probeAt = now;
    probeSched = s;
  }, PROBE_MS);
  const stallsNow = (): Stall[] =>
    rawStalls.map((r) => {
      let gcMs = 0;
      for (const g of gcPauses) gcMs += Math.max(0, Math.min(r.end, g.end) - Math.max(r.start, g.start));
      return { at: r.start - begun, ms: r.end - r.start, cpuMs: r.cpuMs, gcMs, waitCpuMs: r.waitCpuMs, jsMs: Math.max(0, r.cpuMs - gcMs) };
    });

  const sampler = setInterval(() => {
    const now = performance.now();
    const gap = now - lastTick - SAMPLE_MS;
    lastTick = now;
    if (gap > longestStall) longestStall = gap;
    if (gap > SAMPLE_MS) stalled += gap;
    if (gap > secondMax) secondMax = gap;
    const m = process.memoryUsage();
    last = { rss: m.rss, heap: m.heapUsed };
    heapNowMb = mb(m.heapUsed);
    peak = { rss: Math.max(peak.rss, m.rss), heap: Math.max(peak.heap, m.heapUsed), ext: Math.max(peak.ext, m.external + m.arrayBuffers) };
    if (now - secondStart >= 1000) {
      send({
        type: 'sample',
        t: Math.round(now - begun),
        rssMb: Math.round(mb(m.rss)),
        heapMb: Math.round(mb(m.heapUsed)),
        eldMaxMs: Math.round(secondMax + SAMPLE_MS),
        summary: summary(),
      });
      secondStart = now;
      secondMax = 0;
    }
  }, SAMPLE_MS);

  const summary = (): ChildSummary => {
    const cpu = process.cpuUsage(cpu0);
    return {
      ms: Math.round(performance.now() - begun),
      eld: {
        p50: eld.percentile(50) / 1e6,
        p99: eld.percentile(99) / 1e6,
        max: eld.max / 1e6,
        mean: eld.mean / 1e6,
        count: eld.count,
      },
      longestStallMs: longestStall,
      stalledMs: stalled,
      gcMaxMs: gc.max,
      gcOver50: gc.over50,
      gcByKind: gc.byKind,
      gcLongest: gc.longest,
      stalls: stallsNow()
        .sort((a, b) => b.ms - a.ms)
        .slice(0, 10),
      stallCount: rawStalls.length,
      jsStall: stallsNow().sort((a, b) => b.jsMs - a.jsMs)[0],
      peakRssMb: mb(peak.rss),
      peakHeapMb: mb(peak.heap),
      peakExternalMb: mb(peak.ext),
      rssMb: mb(last.rss),
      heapMb: mb(last.heap),
      cpuSeconds: (cpu.user + cpu.system) / 1e6,
      monitors: {
        registrations: monitors.reduce((a, m) => a + m.monitor.stats.registrations, 0) - regs0,
        fenced: monitorStats0('fenced') - base.fenced,
        killed: monitorStats0('killed') - base.killed,
        lost: monitorStats0('lost') - base.lost,
        leaseChanges: monitors.filter((m, i) => m.monitor.leaseId !== leases0[i]).length,
      },
      frontEnd: {
        fencedLeases: sched.manager.stats.fencedLeases - fe0.fencedLeases,
        leaseChanged: sched.manager.leaseId !== feLease0,
        adopted: sched.manager.stats.adopted - fe0.adopted,
        lost: sched.manager.stats.lost - fe0.lost,
      },
    };
  };

  process.on('message', (m: ToChild) => {
    if (m.type === 'begin') {
      eld.reset();
      begun = performance.now();
      cpu0 = process.cpuUsage();
      const mem = process.memoryUsage();
      peak = { rss: mem.rss, heap: mem.heapUsed, ext: mem.external + mem.arrayBuffers };
      longestStall = 0;
      stalled = 0;
      gc.max = 0;
      gc.over50 = 0;
      gc.byKind = {};
      gc.longest = undefined;
      rawStalls.length = 0;
      gcPauses.length = 0;
      if (cfg.heapSnapshotAtMs !== undefined) {
        setTimeout(() => {
          const file = writeHeapSnapshot(join(cfg.heapSnapshotDir ?? tmpdir(), `front-end-${process.pid}.heapsnapshot`));
          process.stdout.write(`heap snapshot: ${file}\n`);
        }, cfg.heapSnapshotAtMs).unref();
      }
      lastTick = performance.now();
    } else if (m.type === 'report') {
      send({ type: 'report', summary: summary() });
    } else if (m.type === 'exit') {
      clearInterval(probe);
      clearInterval(sampler);
      if (cfg.exitAtOnce) process.exit(0);
      const hard = setTimeout(() => process.exit(0), 10_000);
      void (async () => {
        await sched.close().catch(() => undefined);
        await Promise.all(monitors.map((x) => x.close().catch(() => undefined)));
        await store.close().catch(() => undefined);
        clearTimeout(hard);
        process.exit(0);
      })();
    }
  });
  process.on('disconnect', () => process.exit(0));
  send({ type: 'ready', port: sched.port, metricsPort: sched.metricsPort, rus: servers.reduce((a, s) => a + s.rus, 0), servers: servers.length });
}

// ---------------------------------------------------------------------------------------------
// Parent: the clients.

interface CaseDef {
  name: string;
  kind: 'incremental' | 'gang' | 'cancel';
  tasks: number;
  watchers: number;
  /** Incremental and gang: how long the job may run before it is cancelled; cancel: when to cancel. */
  runMs: number;
  /** Task duration (default TASK_MS). */
  taskMs?: number;
  /** Open the watchers this long after the submission (not at once), with a GetJob and an ExplainJob. */
  lateMs?: number;
}

interface StreamStats {
  events: number;
  bytes: number;
  maxEventBytes: number;
  /** Task records carried (the job's task_list plus JobEvent.tasks). */
  taskRecords: number;
  firstEventMs: number | undefined;
  lastState: string;
  end: string | undefined;
}

interface CaseResult {
  name: string;
  kind: CaseDef['kind'];
  tasks: number;
  watchers: number;
  runMs: number;
  store: string;
  submit: { ok: boolean; ms: number; code?: string; details?: string };
  jobId?: string;
  /** State when the run bound was reached (or final), and task counts then. */
  stateAtBound?: string;
  messageAtBound?: string;
  taskStatesAtBound?: Record<string, number>;
  finalMs?: number;
  cancel?: { rpcMs: number; rpcOk: boolean; rpcDetails?: string; cancelledAfterMs?: number; finalState?: string; rusFreeAfterMs?: number };
  streams: StreamStats[];
  child?: ChildSummary;
  /** The front-end's own /metrics at the end of the case (prom-client's event-loop lag, since start). */
  promEventLoop?: Record<string, number>;
  survived: boolean;
  crash?: string;
  /** Peak RSS of the front-end process (VmHWM from /proc, read by this process: valid even if it died). */
  peakRssMb?: number;
  /** Longest time without a sample from the front-end (it sends one a second), beyond that second. */
  longestSilenceMs: number;
  /** The end of the front-end's output when it did not survive. */
  outputTail?: string;
  timeline: { t: number; rssMb: number; heapMb: number; eldMaxMs: number }[];
  wallMs: number;
  /** The late clients (CaseDef.lateMs): when, and how long GetJob and ExplainJob took. */
  late?: { atMs: number; getJob: { ms: number; listed?: number; omitted?: number; error?: string }; explainMs: number };
}

const argv = process.argv.slice(2);
const flag = (name: string): string | undefined => {
  const i = argv.indexOf(name);
  return i >= 0 ? argv[i + 1] : undefined;
};

/** A minimal protobuf reader: the few fields of JobEvent/Job we count, without decoding task lists. */
function scanJobEvent(buf: Buffer): { state: string; taskRecords: number; more: boolean } {
  let state = '';
  let taskRecords = 0;
  let more = false;
  const varint = (b: Buffer, pos: { i: number }): number => {
    let x = 0;
    let mul = 1;
    for (;;) {
      const byte = b[pos.i++]!;
      x += (byte & 0x7f) * mul;
      if (byte < 0x80) return x;
      mul *= 128;
    }
  };
  const walk = (b: Buffer, start: number, end: number, onField: (field: number, wire: number, pos: { i: number }, len: number) => void): void => {
    const pos = { i: start };
    while (pos.i < end) {
      const tag = varint(b, pos);
      const field = Math.floor(tag / 8);
      const wire = tag & 7;
      if (wire === 0) {
        const v = varint(b, pos);
        onField(field, wire, pos, v);
      } else if (wire === 2) {
        const len = varint(b, pos);
        onField(field, wire, pos, len);
        pos.i += len;
      } else if (wire === 1) pos.i += 8;
      else if (wire === 5) pos.i += 4;
      else return; // groups are not used by this API
    }
  };
  walk(buf, 0, buf.length, (field, wire, pos, len) => {
    if (field === 1 && wire === 2) {
      walk(buf, pos.i, pos.i + len, (f, w, p, l) => {
        if (f === 3 && w === 2) state = buf.toString('utf8', p.i, p.i + l);
        else if (f === 14 && w === 2) taskRecords++;
      });
    } else if (field === 3 && wire === 2) taskRecords++;
    else if (field === 4 && wire === 0) more = len !== 0;
  });
  return { state, taskRecords, more };
}

const FINAL = new Set(['succeeded', 'failed', 'cancelled']);
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
const CLIENT_OPTS = { 'grpc.max_receive_message_length': -1, 'grpc.use_local_subchannel_pool': 1 };

function unary<Res>(
  invoke: (opts: grpc.CallOptions, cb: grpc.requestCallback<Res>) => unknown,
  deadlineMs: number,
): Promise<{ ok: true; value: Res; ms: number } | { ok: false; code: string; details: string; ms: number }> {
  const t0 = performance.now();
  return new Promise((resolve) => {
    invoke({ deadline: new Date(Date.now() + deadlineMs) }, (err, res) => {
      const ms = performance.now() - t0;
      if (err || res === undefined) resolve({ ok: false, code: err ? (grpc.status[err.code] ?? String(err.code)) : 'EMPTY', details: err?.details ?? '', ms });
      else resolve({ ok: true, value: res, ms });
    });
  });
}

interface Child {
  proc: ChildProcess;
  ready: Promise<Extract<FromChild, { type: 'ready' }>>;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  dead: boolean;
  output: () => string;
  lastSample: Extract<FromChild, { type: 'sample' }> | undefined;
  /** performance.now() when the last sample arrived. */
  lastSampleAt: number | undefined;
  longestSilenceMs(): number;
  timeline: CaseResult['timeline'];
  request(): Promise<ChildSummary | undefined>;
  send(m: ToChild): void;
}

function startChild(cfg: ChildConfig, heapMb: number, profDir: string | undefined): Child {
  const args = [
    `--max-old-space-size=${heapMb}`,
    ...(profDir ? ['--cpu-prof', '--cpu-prof-dir', profDir, '--cpu-prof-interval', String(PROF_INTERVAL_US)] : []),
    '--import',
    'tsx',
    SELF,
    '--child',
    JSON.stringify(cfg),
  ];
  const proc = spawn(process.execPath, args, {
    stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
    env: { ...process.env, TARCIL_LOG: process.env.TARCIL_LOG ?? 'warn' },
  });
  let out = '';
  const keep = (d: Buffer): void => {
    out = (out + d.toString()).slice(-64_000);
  };
  proc.stdout?.on('data', keep);
  proc.stderr?.on('data', keep);
  const reports: ((s: ChildSummary | undefined) => void)[] = [];
  let silence = 0;
  let diedAt: number | undefined;
  const c: Child = {
    proc,
    dead: false,
    output: () => out,
    lastSample: undefined,
    lastSampleAt: undefined,
    longestSilenceMs: () => Math.max(silence, c.lastSampleAt !== undefined ? (diedAt ?? performance.now()) - c.lastSampleAt - 1000 : 0),
    timeline: [],
    ready: new Promise((resolve, reject) => {
      proc.on('message', (m: FromChild) => {
        if (m.type === 'ready') resolve(m);
        else if (m.type === 'sample') {
          c.lastSample = m;
          const now = performance.now();
          if (c.lastSampleAt !== undefined) silence = Math.max(silence, now - c.lastSampleAt - 1000);
          c.lastSampleAt = now;
          c.timeline.push({ t: m.t, rssMb: m.rssMb, heapMb: m.heapMb, eldMaxMs: m.eldMaxMs });
        } else if (m.type === 'report') reports.shift()?.(m.summary);
      });
      proc.once('exit', (code) => reject(new Error(`front-end exited (${code}) before it was ready:\n${out.slice(-3000)}`)));
    }),
    exited: new Promise((resolve) =>
      proc.once('exit', (code, signal) => {
        c.dead = true;
        diedAt = performance.now();
        for (const r of reports.splice(0)) r(undefined);
        resolve({ code, signal });
      }),
    ),
    send: (m) => {
      if (!c.dead && proc.connected) proc.send(m);
    },
    request: () =>
      new Promise((resolve) => {
        if (c.dead) return resolve(undefined);
        const t = setTimeout(() => resolve(undefined), 60_000);
        reports.push((s) => {
          clearTimeout(t);
          resolve(s);
        });
        c.send({ type: 'report' });
      }),
  };
  return c;
}

function crashReason(out: string, exit: { code: number | null; signal: NodeJS.Signals | null }): string {
  const oom = /FATAL ERROR: [^\n]*/.exec(out)?.[0] ?? (/JavaScript heap out of memory/.test(out) ? 'JavaScript heap out of memory' : undefined);
  const where = /at ([A-Za-z_$][\w$.]*) \(/.exec(out.slice(out.indexOf('FATAL ERROR')))?.[1];
  return `${oom ?? 'exited'} (code ${exit.code ?? '-'}, signal ${exit.signal ?? '-'})${where ? `; JS stack top: ${where}` : ''}`;
}

/** Polls /proc/<pid>/status for the peak RSS (VmHWM), which survives a blocked event loop. */
function procWatcher(child: Child): { read(): void; stop(): void; peakMb(): number | undefined } {
  let peak: number | undefined;
  const read = (): void => {
    try {
      const m = /VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${child.proc.pid}/status`, 'utf8'));
      if (m) peak = Math.max(peak ?? 0, Number(m[1]) / 1024);
    } catch {
      // gone, or not Linux
    }
  };
  const t = setInterval(() => {
    if (!child.dead) read();
  }, 250);
  return { read, stop: () => clearInterval(t), peakMb: () => peak };
}

async function runCase(
  def: CaseDef,
  o: { url: string; storeName: string; heapMb: number; cancelWaitMs: number; hardMs: number; profDir?: string; heapSnapshot?: { atMs: number; dir: string } },
): Promise<CaseResult> {
  const t0 = performance.now();
  const cfg: ChildConfig = {
    store: o.url,
    prefix: `/bench-big-${def.name}-${Date.now()}/`,
    ...(o.profDir ? { exitAtOnce: true } : {}),
    ...(o.heapSnapshot ? { heapSnapshotAtMs: o.heapSnapshot.atMs, heapSnapshotDir: o.heapSnapshot.dir } : {}),
  };
  const child = startChild(cfg, o.heapMb, o.profDir);
  const ready = await child.ready;
  const addr = `127.0.0.1:${ready.port}`;
  const Scheduler = loadProtos().proto.tarcil.v1.Scheduler;
  const c = new Scheduler(addr, grpc.credentials.createInsecure(), CLIENT_OPTS);
  const watchDef = Scheduler.service.WatchJob;
  const watchers: grpc.Client[] = [];
  const streams: StreamStats[] = [];
  const calls: grpc.ClientReadableStream<unknown>[] = [];
  const r: CaseResult = {
    name: def.name,
    kind: def.kind,
    tasks: def.tasks,
    watchers: def.watchers,
    runMs: def.runMs,
    store: o.storeName,
    submit: { ok: false, ms: 0 },
    streams,
    survived: true,
    timeline: child.timeline,
    wallMs: 0,
    longestSilenceMs: 0,
  };
  const proc = procWatcher(child);
  let hardHit = false;
  let silentMs = 0;
  const hard = setTimeout(() => {
    hardHit = true;
    silentMs = child.lastSampleAt !== undefined ? performance.now() - child.lastSampleAt : NaN;
    proc.read();
    child.proc.kill('SIGKILL');
  }, o.hardMs);
  await sleep(500); // let the monitors' first keepalives and the followers settle
  child.send({ type: 'begin' });
  await sleep(200);

  // maxQueueMs 0: placed at once, never held by admission control, so the job runs from the start.
  const spec = {
    name: `big-${def.kind}-${def.tasks}`,
    profile: PROFILE,
    tasks: def.tasks,
    durationMs: def.taskMs ?? TASK_MS,
    maxQueueMs: 0,
    mode: def.kind === 'gang' ? 'gang' : 'incremental',
  };
  const sub = await unary<{ jobId: string }>((opts, cb) => c.SubmitJob({ specJson: JSON.stringify(spec) }, opts, cb), 120_000);
  r.submit = sub.ok ? { ok: true, ms: sub.ms } : { ok: false, ms: sub.ms, code: sub.code, details: sub.details.slice(0, 300) };
  const submittedAt = performance.now();
  const log = (s: string): void => {
    process.stdout.write(`  [${def.name} +${((performance.now() - submittedAt) / 1000).toFixed(1)} s] ${s}\n`);
  };
  log(
    sub.ok
      ? `SubmitJob answered in ${fmt(sub.ms, 0)} ms: ${sub.value.jobId}`
      : `SubmitJob failed after ${fmt(sub.ms, 0)} ms: ${sub.code} ${sub.details.slice(0, 160)}`,
  );

  if (sub.ok) {
    const jobId = sub.value.jobId;
    r.jobId = jobId;
    const openWatcher = (): void => {
      const client = new grpc.Client(addr, grpc.credentials.createInsecure(), CLIENT_OPTS);
      watchers.push(client);
      const st: StreamStats = { events: 0, bytes: 0, maxEventBytes: 0, taskRecords: 0, firstEventMs: undefined, lastState: '', end: undefined };
      streams.push(st);
      const opened = performance.now();
      const call = client.makeServerStreamRequest(
        watchDef.path,
        watchDef.requestSerialize,
        (buf: Buffer) => {
          st.events++;
          st.bytes += buf.length;
          if (buf.length > st.maxEventBytes) st.maxEventBytes = buf.length;
          st.firstEventMs ??= performance.now() - opened;
          const ev = scanJobEvent(buf);
          st.taskRecords += ev.taskRecords;
          if (ev.state) st.lastState = ev.state;
          return ev; // not null: a null message would end the stream
        },
        { jobId },
        {},
      );
      call.on('data', () => undefined);
      call.on('error', (e: grpc.ServiceError) => {
        st.end ??= `${grpc.status[e.code] ?? e.code}: ${(e.details ?? '').slice(0, 120)}`;
      });
      call.on('status', (s: grpc.StatusObject) => {
        st.end ??= s.code === grpc.status.OK ? 'OK' : `${grpc.status[s.code] ?? s.code}: ${s.details.slice(0, 120)}`;
      });
      calls.push(call);
    };
    if (def.lateMs === undefined) for (let i = 0; i < def.watchers; i++) openWatcher();

    // Until final or the run bound; the job's state from ListJobs (no task list).
    let state = '';
    let counts: Record<string, number> = {};
    let message = '';
    let lastLog = 0;
    while (!child.dead) {
      const res = await unary<{ jobs: Job__Output[] }>((opts, cb) => c.ListJobs({ states: [], limit: 0 }, opts, cb), 30_000);
      if (res.ok) {
        const j = res.value.jobs.find((x) => x.id === jobId);
        if (j) {
          state = j.state;
          counts = { ...j.taskStates };
          message = j.message;
        }
      }
      const el = performance.now() - submittedAt;
      if (el - lastLog >= 5000) {
        lastLog = el;
        log(`${state} ${JSON.stringify(counts)}; RSS ${child.lastSample?.rssMb ?? '?'} MB; events/stream ${streams[0]?.events ?? 0}`);
      }
      if (FINAL.has(state)) {
        r.finalMs = el;
        break;
      }
      if (el >= def.runMs) break;
      if (def.lateMs !== undefined && el >= def.lateMs && !r.late) {
        // Clients that come late to a job with tens of thousands of task records: each stream
        // starts with a snapshot of them all; GetJob lists one page (1,000); ExplainJob looks for re-placements.
        log(`opening ${def.watchers} WatchJob streams, GetJob and ExplainJob`);
        for (let i = 0; i < def.watchers; i++) openWatcher();
        const [g, e] = await Promise.all([
          unary<Job__Output>((opts, cb) => c.GetJob({ jobId }, opts, cb), 30_000),
          unary<unknown>((opts, cb) => c.ExplainJob({ jobId }, opts, cb), 30_000),
        ]);
        r.late = {
          atMs: el,
          getJob: g.ok ? { ms: g.ms, listed: g.value.taskList.length, omitted: g.value.tasksOmitted } : { ms: g.ms, error: `${g.code} ${g.details}` },
          explainMs: e.ms,
        };
        log(
          `GetJob ${fmt(g.ms, 0)} ms (${g.ok ? `${g.value.taskList.length} listed, ${g.value.tasksOmitted} omitted` : g.code}), ExplainJob ${fmt(e.ms, 0)} ms`,
        );
      }
      const nextAt = def.lateMs !== undefined && !r.late ? Math.min(def.runMs, def.lateMs) : def.runMs;
      // Every 50 ms for the first two seconds (a small job ends within them), then every second.
      await sleep(Math.min(el < 2000 ? 50 : 1000, Math.max(50, nextAt - el)));
    }
    r.stateAtBound = state;
    r.taskStatesAtBound = counts;
    if (message) r.messageAtBound = message.slice(0, 300);

    // A profiled run does not cancel: a front-end that blocks on the cancellation would never
    // write its profile.
    if (!child.dead && !FINAL.has(state) && !o.profDir) {
      const tc = performance.now();
      const cr = await unary<Job__Output>((opts, cb) => c.CancelJob({ jobId }, opts, cb), 60_000);
      r.cancel = { rpcMs: cr.ms, rpcOk: cr.ok, ...(cr.ok ? {} : { rpcDetails: `${cr.code}: ${cr.details.slice(0, 160)}` }) };
      log(`CancelJob answered in ${fmt(cr.ms, 0)} ms (${cr.ok ? cr.value.state : `${cr.code} ${cr.details}`})`);
      while (!child.dead && performance.now() - tc < o.cancelWaitMs) {
        const res = await unary<{ jobs: Job__Output[] }>((opts, cb) => c.ListJobs({ states: [], limit: 0 }, opts, cb), 30_000);
        const j = res.ok ? res.value.jobs.find((x) => x.id === jobId) : undefined;
        if (j && FINAL.has(j.state)) {
          r.cancel.cancelledAfterMs = performance.now() - tc;
          r.cancel.finalState = j.state;
          break;
        }
        await sleep(200);
      }
      while (!child.dead && performance.now() - tc < o.cancelWaitMs) {
        const res = await unary<{ free: number; rus: number }>((opts, cb) => c.GetCluster({}, opts, cb), 30_000);
        if (res.ok && res.value.free === ready.rus) {
          r.cancel.rusFreeAfterMs = performance.now() - tc;
          break;
        }
        await sleep(200);
      }
      log(
        `cancel: ${r.cancel.finalState ?? 'not final'} after ${fmt(r.cancel.cancelledAfterMs ?? NaN, 0)} ms, RUs free after ${fmt(r.cancel.rusFreeAfterMs ?? NaN, 0)} ms`,
      );
    }
    // The last events of a final job.
    const until = performance.now() + 2000;
    while (!child.dead && performance.now() < until && streams.some((s) => s.end === undefined)) await sleep(100);
  }

  // Prometheus' view of the event loop, as a scrape would see it.
  if (!child.dead && ready.metricsPort !== undefined) {
    try {
      const text = await (await fetch(`http://127.0.0.1:${ready.metricsPort}/metrics`, { signal: AbortSignal.timeout(30_000) })).text();
      r.promEventLoop = {};
      for (const m of text.matchAll(/^(\S*eventloop_lag\S*) ([\d.eE+-]+)$/gm)) r.promEventLoop[m[1]!] = Number(m[2]);
    } catch {
      // a front-end that cannot answer within 30 s shows in the other figures
    }
  }
  r.child = (await child.request()) ?? undefined;
  for (const call of calls) call.cancel();
  for (const w of watchers) w.close();
  c.close();
  child.send({ type: 'exit' });
  const exit = await Promise.race([child.exited, sleep(20_000).then(() => undefined)]);
  if (!exit) {
    child.proc.kill('SIGKILL');
    await child.exited;
  }
  clearTimeout(hard);
  proc.stop();
  r.peakRssMb = proc.peakMb();
  r.longestSilenceMs = child.longestSilenceMs();
  const ex = exit ?? { code: null, signal: 'SIGKILL' as NodeJS.Signals };
  if (!r.child || hardHit || (ex.code !== 0 && ex.code !== null) || (ex.signal !== null && ex.signal !== 'SIGKILL')) {
    r.survived = !!r.child && !hardHit;
    if (!r.survived) {
      r.crash = hardHit
        ? `killed by the benchmark at its ${o.hardMs / 1000} s limit${silentMs > 2000 ? `, after ${fmt(silentMs / 1000, 0)} s without a sign of life (event loop blocked)` : ''}`
        : crashReason(child.output(), ex);
    }
  }
  if (!r.child && child.lastSample) {
    // The process died or was killed: what it said last (once a second), and its silence since.
    const last = child.lastSample.summary;
    r.child = {
      ...last,
      partial: true,
      eld: { ...last.eld, max: Math.max(last.eld.max, r.longestSilenceMs) },
      longestStallMs: Math.max(last.longestStallMs, r.longestSilenceMs),
      stalledMs: last.stalledMs + r.longestSilenceMs,
    };
  }
  if (!r.survived) r.outputTail = child.output().slice(-4000);
  r.wallMs = performance.now() - t0;
  if (r.crash) log(`front-end did not survive: ${r.crash}`);
  return r;
}

/** Self time per function of a .cpuprofile, largest first. */
function topSelfTime(path: string, n: number): { fn: string; ms: number; share: number }[] {
  const p = JSON.parse(readFileSync(path, 'utf8')) as {
    nodes: { id: number; callFrame: { functionName: string; url: string; lineNumber: number } }[];
    samples: number[];
    timeDeltas: number[];
  };
  const frame = new Map(p.nodes.map((x) => [x.id, x.callFrame]));
  const self = new Map<string, number>();
  let total = 0;
  p.samples.forEach((id, i) => {
    const f = frame.get(id);
    const us = p.timeDeltas[i] ?? 0;
    total += us;
    if (!f) return;
    const key = `${f.functionName || '(anonymous)'} ${f.url ? `${basename(f.url)}:${f.lineNumber + 1}` : ''}`.trim();
    self.set(key, (self.get(key) ?? 0) + us);
  });
  return [...self.entries()]
    .sort((a, b) => b[1] - a[1])
    .slice(0, n)
    .map(([fn, us]) => ({ fn, ms: us / 1000, share: us / total }));
}

/**
 * The longest stretches of a profile without an idle sample after `fromS` seconds, by the JS time
 * in them (samples outside the collector, each counted at most 3 intervals: a longer gap between
 * samples is the process waiting for a CPU), with the project functions that took it. Under load
 * a stretch spans several turns of the event loop; the stalls table says how long each turn was.
 */
function busyStretches(path: string, fromS: number, n: number): { atS: number; wallMs: number; jsMs: number; gcMs: number; top: string[] }[] {
  const p = JSON.parse(readFileSync(path, 'utf8')) as {
    nodes: { id: number; callFrame: { functionName: string; url: string; lineNumber: number }; children?: number[] }[];
    startTime: number;
    samples: number[];
    timeDeltas: number[];
  };
  const node = new Map(p.nodes.map((x) => [x.id, x]));
  const parent = new Map<number, number>();
  for (const x of p.nodes) for (const c of x.children ?? []) parent.set(c, x.id);
  const mine = (url: string): boolean => url.includes('/src/') && !url.includes('node_modules');
  const frameOf = (id: number): string => {
    for (let x: number | undefined = id; x !== undefined; x = parent.get(x)) {
      const f = node.get(x)?.callFrame;
      if (f && mine(f.url)) return `${f.functionName || '(anonymous)'} ${basename(f.url)}`;
    }
    return `(${node.get(id)?.callFrame.functionName ?? '?'})`;
  };
  const times: number[] = [];
  let t = p.startTime;
  for (const d of p.timeDeltas) times.push((t += d));
  const step = PROF_INTERVAL_US * 3;
  const out: { atS: number; wallMs: number; jsMs: number; gcMs: number; top: string[] }[] = [];
  let start = -1;
  const close = (a: number, b: number): void => {
    let js = 0;
    let gc = 0;
    const by = new Map<string, number>();
    for (let i = a; i < b; i++) {
      const dt = Math.min((times[i + 1] ?? 0) - (times[i] ?? 0), step);
      const id = p.samples[i] as number;
      if (node.get(id)?.callFrame.functionName === '(garbage collector)') gc += dt;
      else {
        js += dt;
        const f = frameOf(id);
        by.set(f, (by.get(f) ?? 0) + dt);
      }
    }
    const top = [...by]
      .sort((x, y) => y[1] - x[1])
      .slice(0, 4)
      .map(([f, us]) => `${f} ${fmt(us / 1000, 0)}`);
    out.push({ atS: ((times[a] ?? 0) - p.startTime) / 1e6, wallMs: ((times[b] ?? 0) - (times[a] ?? 0)) / 1000, jsMs: js / 1000, gcMs: gc / 1000, top });
  };
  for (let i = 0; i < p.samples.length; i++) {
    const idle = node.get(p.samples[i] as number)?.callFrame.functionName === '(idle)';
    if (!idle && start < 0 && ((times[i] ?? 0) - p.startTime) / 1e6 >= fromS) start = i;
    else if (idle && start >= 0) {
      close(start, i);
      start = -1;
    }
  }
  return out.sort((a, b) => b.jsMs - a.jsMs).slice(0, n);
}

async function parentMain(): Promise<void> {
  const quick = argv.includes('--quick');
  const storeName = flag('--store') ?? 'memory';
  if (storeName !== 'memory' && storeName !== 'etcd') throw new Error('--store must be memory or etcd');
  const heapMb = Number(flag('--heap-mb') ?? 2048);
  const name = flag('--name') ?? 'big-jobs';
  const cpuProf = argv.includes('--cpu-prof');
  const only = flag('--only')?.split(',');
  const run = quick ? 10_000 : 30_000;
  const all: CaseDef[] = [
    { name: 'inc-10k-k1', kind: 'incremental', tasks: 10_000, watchers: 1, runMs: run },
    { name: 'inc-10k-k10', kind: 'incremental', tasks: 10_000, watchers: 10, runMs: run },
    { name: 'inc-30k-k1', kind: 'incremental', tasks: 30_000, watchers: 1, runMs: run },
    { name: 'inc-30k-k10', kind: 'incremental', tasks: 30_000, watchers: 10, runMs: run },
    { name: 'inc-100k-k1', kind: 'incremental', tasks: 100_000, watchers: 1, runMs: run },
    { name: 'inc-100k-k10', kind: 'incremental', tasks: 100_000, watchers: 10, runMs: run },
    // The job of the original report: tasks of 1 s, so the cell is busy but the process is not
    // saturated; what is left of the event-loop delay is what one operation costs.
    { name: 'inc-100k-k10-1s', kind: 'incremental', tasks: 100_000, watchers: 10, runMs: run, taskMs: 1000 },
    // Ten streams opened, and a GetJob and an ExplainJob, once the job has ~15,000 task records.
    { name: 'late-100k-k10', kind: 'incremental', tasks: 100_000, watchers: 10, runMs: run, lateMs: run * 0.6 },
    { name: 'gang-24', kind: 'gang', tasks: 24, watchers: 1, runMs: quick ? 8000 : 15_000 },
    { name: 'gang-10k', kind: 'gang', tasks: 10_000, watchers: 1, runMs: quick ? 8000 : 15_000 },
    // No watcher: the cost of the cancellation alone (the incremental cases cancel with watchers).
    { name: 'cancel-100k', kind: 'cancel', tasks: 100_000, watchers: 0, runMs: quick ? 5000 : 10_000 },
  ];
  const quickSet = new Set(['inc-10k-k1', 'inc-100k-k1', 'gang-24', 'gang-10k', 'cancel-100k']);
  const watchersArg = flag('--watchers');
  if (watchersArg !== undefined) for (const c of all) c.watchers = Number(watchersArg);
  const cases = all.filter((c) => (only ? only.includes(c.name) : !quick || quickSet.has(c.name)));
  if (cases.length === 0) throw new Error(`--only: no such case (known: ${all.map((c) => c.name).join(', ')})`);
  const cancelWaitMs = quick ? 10_000 : 25_000;
  // A front-end that stops answering is killed this long after it started (its case then ends).
  const hardMs =
    flag('--hard-s') !== undefined ? Number(flag('--hard-s')) * 1000 : Math.max(...cases.map((c) => c.runMs)) + cancelWaitMs + (quick ? 10_000 : 30_000);
  const profDir = cpuProf ? mkdtempSync(join(tmpdir(), 'tarcil-big-prof-')) : undefined;
  const snapshotS = flag('--heap-snapshot');
  const heapSnapshot = snapshotS !== undefined ? { atMs: Number(snapshotS) * 1000, dir: mkdtempSync(join(tmpdir(), 'tarcil-big-heap-')) } : undefined;
  if (heapSnapshot) process.stdout.write(`heap snapshots (${snapshotS} s into each case) go to ${heapSnapshot.dir}\n`);

  let etcd: EtcdProcess | undefined;
  let url = 'memory://';
  if (storeName === 'etcd') {
    etcd = await startEtcd({ bin: ensureEtcd((m) => process.stdout.write(`${m}\n`)) });
    url = etcd.endpoint.replace('http://', 'etcd://');
  }
  const keepAlive = setInterval(() => undefined, 1 << 30);
  const results: CaseResult[] = [];
  const started = Date.now();
  try {
    for (const def of cases) {
      process.stdout.write(`${def.name}: ${def.kind} job of ${def.tasks} tasks, ${def.watchers} watcher(s), store ${storeName}\n`);
      results.push(
        await runCase(def, { url, storeName, heapMb, cancelWaitMs, hardMs, ...(profDir ? { profDir } : {}), ...(heapSnapshot ? { heapSnapshot } : {}) }),
      );
    }
  } finally {
    clearInterval(keepAlive);
    await etcd?.stop();
  }

  const ms = (x: number | undefined, d = 0): string => (x === undefined || !Number.isFinite(x) ? '-' : fmt(x, d));
  const s = (x: number | undefined): string => (x === undefined || !Number.isFinite(x) ? '-' : fmt(x / 1000, 1));
  const perStream = (r: CaseResult, f: (st: StreamStats) => number): number =>
    r.streams.length ? r.streams.reduce((a, st) => a + f(st), 0) / r.streams.length : NaN;
  // A front-end that died or was killed never sent its summary: what it sent each second, and how
  // long it went silent (its event loop was blocked at least that long), are the lower bounds.
  const reported = (r: CaseResult): boolean => !!r.child && !r.child.partial;
  const load = mdTable(
    [
      'case',
      'SubmitJob',
      'event-loop delay p50 / p99 / max ms',
      'longest GC pause ms (pauses > 50 ms)',
      'stalled s',
      'peak RSS MB',
      'peak heap MB',
      'CPU s',
      'survived',
    ],
    results.map((r) => [
      r.name,
      r.submit.ok ? `${ms(r.submit.ms)} ms` : `${r.submit.code} after ${ms(r.submit.ms)} ms`,
      `${ms(r.child?.eld.p50, 1)} / ${ms(r.child?.eld.p99, 1)} / ${reported(r) ? '' : '≥ '}${ms(r.child?.eld.max)}`,
      r.child?.gcMaxMs !== undefined ? `${ms(r.child.gcMaxMs)} (${r.child.gcOver50})` : '-',
      `${reported(r) ? '' : '≥ '}${s(r.child?.stalledMs)}`,
      ms(r.peakRssMb ?? r.child?.peakRssMb),
      `${reported(r) ? '' : '≥ '}${ms(r.child?.peakHeapMb)}`,
      `${reported(r) ? '' : '≥ '}${ms(r.child?.cpuSeconds, 1)}`,
      r.survived ? 'yes' : `**no**: ${r.crash ?? ''}`,
    ]),
  );
  const gcKindsOf = (r: CaseResult, kind: string): string => {
    const k = r.child?.gcByKind?.[kind];
    return k ? `${k.count} / ${ms(k.totalMs / k.count, 1)} / ${ms(k.maxMs)}` : '-';
  };
  const stallText = (x: Stall): string => `${ms(x.ms)} (JS ${ms(x.jsMs)}, GC ${ms(x.gcMs)}, no CPU ${ms(x.waitCpuMs)})`;
  const gcTable = mdTable(
    [
      'case',
      'scavenges: n / mean / max ms',
      'mark-compact: n / mean / max ms',
      'longest pause: kind, heap MB then',
      `stalls > ${STALL_MS} ms`,
      'longest stalls ms (main thread: JS on CPU, in GC, runnable without a CPU)',
      'stall with the most JS ms',
    ],
    results.map((r) => {
      const st = r.child?.stalls ?? [];
      return [
        r.name,
        gcKindsOf(r, 'minor'),
        gcKindsOf(r, 'major'),
        r.child?.gcLongest ? `${r.child.gcLongest.kind}, ${ms(r.child.gcLongest.heapMb)}` : '-',
        ms(r.child?.stallCount),
        st.slice(0, 3).map(stallText).join('; ') || '-',
        r.child?.jsStall ? stallText(r.child.jsStall) : '-',
      ];
    }),
  );
  const api = mdTable(
    [
      'case',
      'state at bound [tasks succeeded]',
      'watch events / stream',
      'bytes / event',
      'largest event',
      'stream end',
      'cancel: RPC / cancelled / RUs free',
      'leases lost: monitor re-registrations / front-end fenced',
    ],
    results.map((r) => [
      r.name,
      `${r.stateAtBound ?? '-'}${r.finalMs !== undefined ? ` after ${s(r.finalMs)} s` : ''} [${r.taskStatesAtBound?.succeeded ?? 0}]`,
      ms(
        perStream(r, (st) => st.events),
        1,
      ),
      ms(perStream(r, (st) => st.bytes) / perStream(r, (st) => st.events)),
      r.streams.length ? `${fmt(Math.max(...r.streams.map((st) => st.maxEventBytes)) / 2 ** 20, 2)} MiB` : '-',
      [...new Set(r.streams.map((st) => st.end ?? 'open'))].join('; ') || '-',
      r.cancel ? `${ms(r.cancel.rpcMs)} ms / ${s(r.cancel.cancelledAfterMs)} s / ${s(r.cancel.rusFreeAfterMs)} s` : '-',
      r.child ? `${ms(r.child.monitors.registrations)} / ${ms(r.child.frontEnd.fencedLeases)}${r.child.partial ? ' (until it went silent)' : ''}` : '-',
    ]),
  );
  const gangAnswers = results
    .filter((r) => r.kind === 'gang')
    .map(
      (r) =>
        `- ${r.name}: SubmitJob ${r.submit.ok ? `accepted in ${ms(r.submit.ms)} ms (job ${r.stateAtBound ?? '?'} after ${s(r.finalMs ?? r.runMs)} s${r.messageAtBound ? `: "${r.messageAtBound}"` : ''})` : `answered ${r.submit.code} in ${ms(r.submit.ms)} ms: "${r.submit.details ?? ''}"`}`,
    )
    .join('\n');
  const lateAnswers = results
    .filter((r) => r.late)
    .map((r) => {
      const l = r.late!;
      const first = r.streams.map((st) => st.firstEventMs).filter((x): x is number => x !== undefined);
      const g = l.getJob.error
        ? `GetJob failed after ${ms(l.getJob.ms)} ms (${l.getJob.error})`
        : `GetJob ${ms(l.getJob.ms)} ms (${l.getJob.listed} tasks listed, ${l.getJob.omitted} omitted)`;
      return `- ${r.name}: at ${s(l.atMs)} s, ${r.watchers} WatchJob streams opened: first event after ${first.length ? ms(Math.max(...first)) : '-'} ms (the slowest), ${ms(perStream(r, (st) => st.taskRecords))} task records per stream in all; ${g}; ExplainJob ${ms(l.explainMs)} ms`;
    })
    .join('\n');
  const crashes = results.filter((r) => !r.survived).map((r) => `- ${r.name}: ${r.crash ?? ''}`);
  const md = `# Big jobs on \`tarcil up\`

The front-end as \`tarcil up\` starts it (demo cell: 10 monitors, 24 RUs, simulated executor; ${UP_AGENTS} agents;
monitor and owner leases of ${UP_LEASE_TTL_S} s; store: ${storeName === 'memory' ? 'embedded MemoryStore' : 'a private local etcd'}) in a child process limited to
\`--max-old-space-size=${heapMb}\`, one fresh process per case. Jobs of \`${PROFILE}\` tasks of ${TASK_MS} ms (1 s in the cases named \`-1s\`), \`maxQueueMs: 0\` (placed at once, never held by admission control);
incremental jobs run for at most ${run / 1000} s, then are cancelled. Watchers are separate gRPC connections
that read every event as it arrives (no receive-size limit; bytes are the serialized JobEvent
messages). Event-loop delay: \`monitorEventLoopDelay\` at ${ELD_RESOLUTION_MS} ms resolution in the front-end
process, from just before SubmitJob to the end of the case (an idle loop reads ≈ ${ELD_RESOLUTION_MS} ms, the
sampling period); "stalled" adds up how late a 100 ms timer fired, counting only delays over 100 ms. "Leases lost":
monitor re-registrations (each follows a lost or fenced lease) and the front-end's fenced owner
leases (\`JobManager.stats.fencedLeases\`); with ${UP_LEASE_TTL_S} s leases a holder fences itself after
about 2.75 s without a confirmed keepalive.
${quick ? '\n**Quick run** (fewer cases, shorter bounds).\n' : ''}
Machine: ${machine()}. Whole run: ${fmt((Date.now() - started) / 1000, 0)} s.

## Load on the front-end

${load}

## Garbage collection and stalls

Pauses from \`PerformanceObserver\` ('gc' entries). A stall is a ${PROBE_MS} ms timer firing more than ${STALL_MS} ms late; what
the main thread did meanwhile comes from its \`/proc/<pid>/task/<pid>/schedstat\` (time on a CPU, and time
runnable but waiting for one) and the collector's pauses that overlap it. "JS" is the CPU time
outside collection: synchronous work of the front-end itself. "No CPU" is time the other processes
of the machine held both cores (it shrinks on an idle machine). The last column is the stall with the most JS time.

${gcTable}

## API, watch streams, cancellation, leases

${api}
${gangAnswers ? `\nGangs:\n\n${gangAnswers}\n` : ''}${lateAnswers ? `\nClients that come late to a running 100,000-task job:\n\n${lateAnswers}\n` : ''}${crashes.length ? `\nCrashes:\n\n${crashes.join('\n')}\n` : ''}
Reproduce: \`npx tsx bench/big-jobs.ts${quick ? ' --quick' : ''}${storeName === 'etcd' ? ' --store etcd' : ''}\`${only ? ` --only ${only.join(',')}` : ''}.
`;
  const data = {
    machine: machine(),
    quick,
    store: storeName,
    heapMb,
    agents: UP_AGENTS,
    leaseTtlSeconds: UP_LEASE_TTL_S,
    taskMs: TASK_MS,
    eldResolutionMs: ELD_RESOLUTION_MS,
    results,
  };
  const dir = resultsDir(quick, 'big-jobs');
  const paths = writeResults(name, data, md, dir);
  process.stdout.write(`\n${load}\n\n${api}\n${gangAnswers}\nwrote ${paths.join(', ')}\n`);

  if (profDir) {
    const files = readdirSync(profDir).filter((f) => f.endsWith('.cpuprofile'));
    const sections: string[] = [];
    for (const f of files) {
      const top = topSelfTime(join(profDir, f), 20);
      sections.push(
        `### ${f}\n\n${mdTable(
          ['function', 'self ms', 'share'],
          top.map((x) => [`\`${x.fn}\``, fmt(x.ms, 0), `${fmt(x.share * 100, 1)}%`]),
        )}`,
      );
      // Past the start-up (module loading, the demo cell's registration).
      const busy = busyStretches(join(profDir, f), 5, 8);
      if (busy.length) {
        sections.push(
          `Busy stretches after 5 s, most JS first:\n\n${mdTable(
            ['at s', 'wall ms', 'JS ms', 'GC ms', 'project functions (JS ms under them)'],
            busy.map((b) => [fmt(b.atS, 2), fmt(b.wallMs, 0), fmt(b.jsMs, 0), fmt(b.gcMs, 0), b.top.join('; ')]),
          )}`,
        );
      }
    }
    const text = `# CPU profile of the front-end (node --cpu-prof), cases: ${cases.map((c) => c.name).join(', ')}\n\nTop self time over the child's life (startup included). Profiles: ${profDir}\n\n${sections.join('\n\n')}\n`;
    const out = join(dir, `${name}-profile.md`);
    writeFileSync(out, text);
    process.stdout.write(`${text}\nwrote ${out}\n`);
  }
}

const childArg = argv.indexOf('--child');
if (childArg >= 0) await childMain(JSON.parse(argv[childArg + 1] ?? '{}') as ChildConfig);
else await parentMain();
