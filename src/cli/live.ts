/**
 * What the live commands do: start a front-end or a node, and the client commands (submit, status,
 * jobs, cluster, explain, cancel) with their output.
 */
import type * as grpc from '@grpc/grpc-js';
import Table from 'cli-table3';
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { expandCluster, loadCatalog, resolveCluster } from '../model/catalog.ts';
import type { ServerSpec } from '../model/types.ts';
import { attemptLines } from '../frontend/convert.ts';
import { parseAgentOptions } from '../agent/config.ts';
import { schedulerClient } from '../frontend/client.ts';
import { CLIENT_DEFAULTS, UP_DEFAULTS } from '../frontend/options.ts';
import { journalDirFor } from '../monitor/options.ts';
import type { Cluster__Output } from '../frontend/gen/tarcil/v1/Cluster.ts';
import type { Explanation__Output } from '../frontend/gen/tarcil/v1/Explanation.ts';
import type { ProfileEstimate__Output } from '../frontend/gen/tarcil/v1/ProfileEstimate.ts';
import type { Job__Output } from '../frontend/gen/tarcil/v1/Job.ts';
import type { ListJobsResponse__Output } from '../frontend/gen/tarcil/v1/ListJobsResponse.ts';
import type { SubmitJobResponse__Output } from '../frontend/gen/tarcil/v1/SubmitJobResponse.ts';
import type { SchedulerClient } from '../frontend/gen/tarcil/v1/Scheduler.ts';
import { startMonitor, startScheduler, type MonitorProcess, type SchedulerProcess } from '../frontend/runtime.ts';
import { openStore } from '../store/index.ts';
import { Keys } from '../state/keys.ts';
import { fmtRetain } from '../state/retention.ts';
import type { ClusterStore } from '../store/types.ts';
import { SystemClock } from '../util/clock.ts';
import { errorMessage, invalid, TarcilError } from '../util/errors.ts';
import { createLogger, type Logger } from '../util/log.ts';
import { watchStalls } from '../util/stalls.ts';
import { nodeNotes } from './node-commands.ts';
import { SeededRng } from '../util/rng.ts';

export interface StoreFlags {
  store: string;
  prefix: string;
  etcdCa?: string;
  etcdCert?: string;
  etcdKey?: string;
}

export interface TlsFlags {
  tlsCert?: string;
  tlsKey?: string;
  tlsCa?: string;
}

export async function open(o: StoreFlags): Promise<ClusterStore> {
  const tls = o.etcdCa || o.etcdCert || o.etcdKey ? { ...(o.etcdCa ? { caFile: o.etcdCa } : {}), ...(o.etcdCert ? { certFile: o.etcdCert } : {}), ...(o.etcdKey ? { keyFile: o.etcdKey } : {}) } : undefined;
  return openStore(o.store, tls ? { tls } : {});
}

export function serverTls(o: TlsFlags): { certFile: string; keyFile: string; caFile?: string } | undefined {
  if (!o.tlsCert && !o.tlsKey) return undefined;
  if (!o.tlsCert || !o.tlsKey) throw invalid(o.tlsCert ? '--tls-key' : '--tls-cert', 'is required with the other TLS flag');
  return { certFile: o.tlsCert, keyFile: o.tlsKey, ...(o.tlsCa ? { caFile: o.tlsCa } : {}) };
}

/**
 * Runs until SIGINT/SIGTERM, then closes everything in order (gRPC, owners' leases revoked so
 * other processes adopt at once, monitors' tasks killed and leases revoked) before exiting.
 */
export async function runUntilSignal(log: Logger, close: () => Promise<void>): Promise<void> {
  const keepAlive = setInterval(() => undefined, 1 << 30);
  // Stack traces mapped back to the TypeScript sources cost milliseconds each, paid by every
  // failed store call (gRPC reads the caller's stack): in a daemon under an overloaded store that
  // becomes most of its CPU. They stay available with TARCIL_SOURCE_MAPS=1.
  process.setSourceMapsEnabled(process.env.TARCIL_SOURCE_MAPS === '1');
  const stalls = watchStalls(log);
  await new Promise<void>((resolve) => {
    let closing = false;
    const stop = (sig: string): void => {
      if (closing) {
        log.warn({ sig }, 'second signal: exiting now');
        process.exit(1);
      }
      closing = true;
      log.info({ sig }, 'shutting down');
      close().then(resolve, (err: unknown) => {
        log.error({ err: errorMessage(err) }, 'shutdown failed');
        resolve();
      });
    };
    process.once('SIGINT', () => stop('SIGINT'));
    process.once('SIGTERM', () => stop('SIGTERM'));
  });
  clearInterval(keepAlive);
  stalls.stop();
}

export interface ServerFlags extends StoreFlags, TlsFlags {
  agents: number;
  host: string;
  port: number;
  leaseTtl: number;
  metricsPort?: number;
  name?: string;
  scope: 'ru' | 'server';
  groupCommit: number;
  /** Agent options as key=value (see agent/config.ts). */
  agent?: string[];
  /** Reach the monitors' NodeMonitor services over TLS, trusting this CA. */
  monitorCa?: string;
  /** Retention of finished jobs and the compaction margin, in ms (0: no compaction). */
  retain: number;
  compactMargin: number;
  departedMemory: number;
  unplaceableTimeout: number;
  maxPendingTasks: number;
}

export async function serverCommand(o: ServerFlags): Promise<void> {
  const log = createLogger('tarcil-server');
  // Checked before anything starts: a bad option names itself and the rule (exit code 2).
  const agentOptions = parseAgentOptions(o.agent ?? []);
  const store = await open(o);
  const tls = serverTls(o);
  const sched = await startScheduler({
    name: o.name ?? `${hostname()}-${process.pid}`,
    store,
    keys: new Keys(o.prefix),
    catalog: loadCatalog(),
    clock: new SystemClock(),
    rng: new SeededRng(process.pid),
    log,
    agents: o.agents,
    host: o.host,
    port: o.port,
    leaseTtlSeconds: o.leaseTtl,
    agentConfig: { conflictScope: o.scope, groupCommit: o.groupCommit, ...agentOptions },
    ...(tls ? { tls } : {}),
    // Our own certificate doubles as the client certificate, for monitors that require one.
    ...(o.monitorCa ? { nodeTls: { caFile: o.monitorCa, ...(tls ? { certFile: tls.certFile, keyFile: tls.keyFile } : {}) } } : {}),
    ...(o.metricsPort !== undefined ? { metricsPort: o.metricsPort } : {}),
    retainMs: o.retain,
    compactMarginMs: o.compactMargin,
    departedMemoryMs: o.departedMemory,
    unplaceableTimeoutMs: o.unplaceableTimeout,
    maxPendingTasks: o.maxPendingTasks,
    listenBeforeReady: true,
  });
  // One line on stdout that scripts (and the end-to-end test) wait for.
  process.stdout.write(`tarcil server listening on ${o.host}:${sched.port}${sched.metricsPort !== undefined ? `, metrics on :${sched.metricsPort}/metrics` : ''}\n`);
  // Submissions are taken from now on; placing starts once the cell is loaded.
  const listeningAt = Date.now();
  let stopping = false;
  sched.ready.then(
    () => {
      const uptimeMs = Math.round(process.uptime() * 1000);
      log.info({ afterListenMs: Date.now() - listeningAt, uptimeMs }, 'scheduling: the cell is loaded');
      process.stdout.write(`tarcil server scheduling: the cell is loaded (${uptimeMs} ms after start)\n`);
    },
    (err: unknown) => {
      if (stopping) return;
      log.fatal({ err: errorMessage(err) }, 'the cluster view could not be loaded; exiting');
      process.stderr.write(`tarcil server: the cluster view could not be loaded: ${errorMessage(err)}\n`);
      process.exit(1);
    },
  );
  await runUntilSignal(log, async () => {
    stopping = true;
    await sched.close();
    await store.close();
  });
}

export interface MonitorFlags extends StoreFlags, TlsFlags {
  server: string;
  platform: string;
  rus?: number;
  rack: string;
  attr: string[];
  executor: 'simulated' | 'process';
  host: string;
  port: number;
  advertise?: string;
  leaseTtl: number;
  logDir: string;
  /** Default: <logDir>/journal. */
  journalDir?: string;
  disconnectGrace: number;
  metricsPort?: number;
  cpuRate: boolean;
}

export async function monitorCommand(o: MonitorFlags): Promise<void> {
  const log = createLogger('tarcil-monitor');
  const catalog = loadCatalog();
  const platform = catalog.platforms.get(o.platform);
  if (!platform) throw invalid('--platform', `unknown platform '${o.platform}' (known: ${[...catalog.platforms.keys()].join(', ')})`);
  const attributes: Record<string, string> = {};
  for (const a of o.attr) {
    const eq = a.indexOf('=');
    if (eq <= 0) throw invalid('--attr', `"${a}" must be key=value`);
    attributes[a.slice(0, eq)] = a.slice(eq + 1);
  }
  const spec: ServerSpec = { id: o.server, platform: o.platform, rack: o.rack, rus: o.rus ?? platform.cores, speed: platform.speed, attributes };
  const store = await open(o);
  const tls = serverTls(o);
  // The outcome journal and the grace, handed by startMonitor to the LocalMonitor.
  const settings = { journalDir: o.journalDir ?? journalDirFor(o.logDir), ...(o.disconnectGrace !== undefined ? { disconnectGraceMs: o.disconnectGrace } : {}) };
  const m = await startMonitor({
    store,
    keys: new Keys(o.prefix),
    clock: new SystemClock(),
    log,
    server: spec,
    executor: o.executor,
    host: o.host,
    port: o.port,
    ...(o.advertise ? { advertise: o.advertise } : {}),
    leaseTtlSeconds: o.leaseTtl,
    logDir: o.logDir,
    cpuRate: o.cpuRate,
    ...(o.metricsPort !== undefined ? { metricsPort: o.metricsPort } : {}),
    ...(tls ? { tls } : {}),
    ...settings,
  });
  process.stdout.write(
    `tarcil monitor ${spec.id} (${spec.platform}, ${spec.rus} RUs, ${o.executor}) listening on ${o.host}:${m.port}${m.metricsPort !== undefined ? `, metrics on :${m.metricsPort}/metrics` : ''}; ` +
      `outcome journal ${m.monitor.journalLocation}, disconnect grace ${m.monitor.disconnectGraceMs / 1000} s\n`,
  );
  await runUntilSignal(log, async () => {
    await m.close();
    await store.close();
  });
}

export interface UpFlags extends StoreFlags, TlsFlags {
  cluster: string;
  agents: number;
  host: string;
  port: number;
  metricsPort: number;
  executor: 'simulated' | 'process';
  logDir: string;
  retain: number;
  compactMargin: number;
}

/** Everything in one process: monitors of a demo cluster, N agents, the front-end. */
export async function upCommand(o: UpFlags): Promise<void> {
  const log = createLogger('tarcil', process.env.TARCIL_LOG ?? 'warn');
  const catalog = loadCatalog();
  const servers = expandCluster(resolveCluster(o.cluster, catalog), catalog.platforms);
  const store = await open(o);
  const keys = new Keys(o.prefix);
  const clock = new SystemClock();
  const monitors: MonitorProcess[] = [];
  for (const s of servers) {
    monitors.push(await startMonitor({ store, keys, clock, log, server: s, executor: o.executor, host: '127.0.0.1', port: 0, logDir: o.logDir, leaseTtlSeconds: UP_DEFAULTS.leaseTtlSeconds }));
  }
  const tls = serverTls(o);
  let sched: SchedulerProcess;
  try {
    sched = await startScheduler({
      name: `up-${process.pid}`,
      store,
      keys,
      catalog,
      clock,
      rng: new SeededRng(1),
      log,
      agents: o.agents,
      host: o.host,
      port: o.port,
      leaseTtlSeconds: UP_DEFAULTS.leaseTtlSeconds,
      metricsPort: o.metricsPort,
      retainMs: o.retain,
      compactMarginMs: o.compactMargin,
      ...(tls ? { tls } : {}),
    });
  } catch (err) {
    await Promise.all(monitors.map((m) => m.close()));
    throw err;
  }
  const rus = servers.reduce((a, s) => a + s.rus, 0);
  const addr = `${o.host === '0.0.0.0' ? '127.0.0.1' : o.host}:${sched.port}`;
  const out = (l: string): boolean => process.stdout.write(`${l}\n`);
  out(`tarcil up: cluster ${o.cluster} (${servers.length} servers, ${rus} RUs, ${o.executor} executor), ${o.agents} agents, store ${o.store}`);
  out(`  Scheduler gRPC   ${addr}   (reflection and grpc.health.v1 enabled)`);
  if (sched.metricsPort !== undefined) out(`  metrics          http://${o.host === '0.0.0.0' ? '127.0.0.1' : o.host}:${sched.metricsPort}/metrics`);
  out('');
  out('In another terminal:');
  out('  npx tarcil submit profiles/jobs/spark-lr.json --wait');
  out('  npx tarcil jobs');
  out('  npx tarcil cluster');
  out('  npx tarcil explain <job-id>');
  out(`(add --server ${addr} if you changed the port; Ctrl-C stops everything)`);
  await runUntilSignal(log, async () => {
    await sched.close();
    await Promise.all(monitors.map((m) => m.close()));
    await store.close();
  });
}

// ---------------------------------------------------------------------------------------------
// Client commands

export interface ClientFlags {
  server: string;
  tlsCa?: string;
  timeout: number;
}

function client(o: ClientFlags): SchedulerClient {
  return schedulerClient(o.server, o.tlsCa ? { caFile: o.tlsCa } : undefined);
}

function unary<Res>(timeoutMs: number, invoke: (opts: grpc.CallOptions, cb: grpc.requestCallback<Res>) => unknown): Promise<Res> {
  return new Promise((resolve, reject) => {
    invoke({ deadline: new Date(Date.now() + timeoutMs) }, (err, res) => {
      if (err) reject(fromGrpc(err));
      else if (!res) reject(new TarcilError('INTERNAL', 'empty response'));
      else resolve(res);
    });
  });
}

function fromGrpc(err: grpc.ServiceError): TarcilError {
  const names: Record<number, TarcilError['code']> = { 3: 'INVALID_ARGUMENT', 5: 'NOT_FOUND', 6: 'ALREADY_EXISTS', 8: 'RESOURCE_EXHAUSTED', 9: 'FAILED_PRECONDITION', 14: 'UNAVAILABLE', 4: 'DEADLINE_EXCEEDED', 1: 'CANCELLED' };
  const n = Number(err.code);
  const code = names[n] ?? 'INTERNAL';
  const hint = n === 14 ? ' (is `tarcil up` or `tarcil server` running? see --server)' : '';
  return new TarcilError(code, `${err.details || err.message}${hint}`);
}

function line(j: Job__Output): string {
  const counts = Object.entries(j.taskStates)
    .map(([k, v]) => `${v} ${k}`)
    .join(', ');
  const why = j.message ? `  — ${j.message}` : '';
  return `${j.id}  ${j.name}  ${j.state}  [${counts}]${j.rescheduled ? `  rescheduled ${j.rescheduled}` : ''}${why}`;
}

const TABLE_STYLE = process.stdout.isTTY ? {} : { head: [], border: [] };
const FINAL = new Set(['succeeded', 'failed', 'cancelled']);

export async function submitCommand(file: string, o: ClientFlags & { wait: boolean; requestId?: string; retries?: number }, out: (s: string) => void): Promise<number> {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (e) {
    throw invalid('<spec.json>', `cannot be read (${(e as NodeJS.ErrnoException).code ?? 'error'})`);
  }
  const requestId = o.requestId ?? randomUUID();
  const c = client(o);
  try {
    const res = await submitWithRetry(c, { specJson: text, requestId }, o);
    out(`submitted ${res.jobId}`);
    if (!o.wait) return 0;
    return await new Promise<number>((resolve, reject) => {
      const stream = c.WatchJob({ jobId: res.jobId });
      const tty = process.stdout.isTTY;
      let last: Job__Output | undefined;
      stream.on('data', (ev: { job: Job__Output | null }) => {
        if (!ev.job) return;
        last = ev.job;
        const l = line(ev.job);
        if (tty) process.stdout.write(`\r\x1b[K${l}`);
        else out(l);
      });
      stream.on('error', (err: grpc.ServiceError) => reject(fromGrpc(err)));
      stream.on('end', () => {
        if (tty) process.stdout.write('\n');
        resolve(last && FINAL.has(last.state) && last.state === 'succeeded' ? 0 : 1);
      });
    });
  } finally {
    c.close();
  }
}

/**
 * SubmitJob, tried again on UNAVAILABLE or DEADLINE_EXCEEDED with the same request id: the first
 * attempt may have been persisted with only its answer lost, and the id makes the retry return
 * that job instead of creating another. RESOURCE_EXHAUSTED (a front-end's back-pressure: it holds
 * too many tasks not yet placed) is tried again too, after the same growing pause.
 */
export async function submitWithRetry(
  c: SchedulerClient,
  req: { specJson: string; requestId: string },
  o: { timeout: number; retries?: number; retryBaseMs?: number },
): Promise<SubmitJobResponse__Output> {
  const retries = o.retries ?? CLIENT_DEFAULTS.submitRetries;
  let delay = o.retryBaseMs ?? CLIENT_DEFAULTS.retryBaseMs;
  for (let attempt = 0; ; attempt++) {
    try {
      return await new Promise<SubmitJobResponse__Output>((resolve, reject) => {
        c.SubmitJob(req, { deadline: new Date(Date.now() + o.timeout) }, (err, res) => {
          if (err) reject(err);
          else if (!res) reject(new TarcilError('INTERNAL', 'empty response'));
          else resolve(res);
        });
      });
    } catch (err) {
      const code = Number((err as Partial<grpc.ServiceError>).code);
      const transient = code === GRPC_UNAVAILABLE || code === GRPC_DEADLINE_EXCEEDED || code === GRPC_RESOURCE_EXHAUSTED;
      if (!transient || attempt >= retries) throw isServiceError(err) ? fromGrpc(err) : err;
      await new Promise((r) => setTimeout(r, delay / 2 + Math.random() * (delay / 2)));
      delay = Math.min(delay * 2, CLIENT_DEFAULTS.retryMaxMs);
    }
  }
}

const GRPC_DEADLINE_EXCEEDED = 4;
const GRPC_RESOURCE_EXHAUSTED = 8;
const GRPC_UNAVAILABLE = 14;

function isServiceError(e: unknown): e is grpc.ServiceError {
  return e instanceof Error && typeof (e as Partial<grpc.ServiceError>).code === 'number';
}

export async function statusCommand(id: string, o: ClientFlags & { json: boolean; tasksFrom?: number }, out: (s: string) => void): Promise<void> {
  const c = client(o);
  try {
    const j = await unary<Job__Output>(o.timeout, (opts, cb) => c.GetJob({ jobId: id, taskFrom: o.tasksFrom ?? 0 }, opts, cb));
    if (o.json) {
      out(JSON.stringify(j, null, 2));
      return;
    }
    out(line(j));
    out(`  profile ${j.profile}, ${j.tasks} tasks, priority ${j.priority}, ${j.mode}, owner ${j.owner || '-'}`);
    const t = new Table({ style: TABLE_STYLE, head: ['task', 'state', 'RU', 'attempt', 'ran ms', 'exit', 'message'] });
    for (const x of j.taskList) {
      const ran = x.startedAtMs && x.endedAtMs ? String(Math.round(x.endedAtMs - x.startedAtMs)) : '';
      t.push([x.index, x.state, x.ru ? `${x.ru.server}/${x.ru.index}` : '', x.attempt, ran, x.exitCode ?? '', (x.message || x.logPath).slice(0, 60)]);
    }
    out(t.toString());
    // tasks_omitted counts every record not on this page, below it (--tasks-from) and after it.
    if (j.nextTaskFrom > 0) out(`  ${j.tasksOmitted} task(s) with a record not on this page; the next page: tarcil status ${id} --tasks-from ${j.nextTaskFrom}`);
    else if (j.tasksOmitted > 0) out(`  ${j.tasksOmitted} task(s) with a record before this page not listed`);
    const again = j.taskList.filter((x) => x.previous.length > 0);
    if (again.length > 0) {
      out(`  placed more than once: ${again.length} task(s)`);
      for (const x of again) for (const l of attemptLines(x)) out(`  ${l}`);
    }
    for (const r of j.loadReports) out(`  load report: task ${r.task} on ${r.server} runs at ${(r.rate * 100).toFixed(0)}% of its expected rate`);
  } finally {
    c.close();
  }
}

export async function jobsCommand(o: ClientFlags & { state?: string[]; limit: number }, out: (s: string) => void): Promise<void> {
  const c = client(o);
  try {
    const res = await unary<ListJobsResponse__Output>(o.timeout, (opts, cb) => c.ListJobs({ states: o.state ?? [], limit: o.limit }, opts, cb));
    const t = new Table({ style: TABLE_STYLE, head: ['id', 'name', 'state', 'tasks', 'profile', 'submitted'] });
    for (const j of res.jobs) {
      const counts = Object.entries(j.taskStates)
        .map(([k, v]) => `${v} ${k}`)
        .join(', ');
      t.push([j.id, j.name, j.state, counts || String(j.tasks), j.profile, new Date(j.submittedAtMs).toISOString().slice(11, 19)]);
    }
    out(res.jobs.length === 0 ? 'no jobs' : t.toString());
    if (res.retainMs > 0) out(`(finished jobs are deleted ${fmtRetain(res.retainMs)} after they end)`);
  } finally {
    c.close();
  }
}

export async function clusterCommand(o: ClientFlags & { json: boolean }, out: (s: string) => void): Promise<void> {
  const c = client(o);
  try {
    const cl = await unary<Cluster__Output>(o.timeout, (opts, cb) => c.GetCluster({}, opts, cb));
    if (o.json) {
      out(JSON.stringify(cl, null, 2));
      return;
    }
    const t = new Table({ style: TABLE_STYLE, head: ['server', 'platform', 'rack', 'state', 'free', 'busy', 'RUs (. free, # busy, r reserved, x down)'] });
    for (const s of cl.servers) {
      const map = s.rus.map((r) => (r.state === 'free' ? '.' : r.state === 'busy' ? '#' : r.state === 'reserved' ? 'r' : 'x')).join('');
      t.push([s.id, s.platform, s.rack, s.state, s.free, s.busy, map]);
    }
    out(t.toString());
    out(`${cl.servers.length} servers, ${cl.rus} RUs: ${cl.free} free, ${cl.busy} busy, ${cl.down} down; ${cl.activeJobs} active jobs, ${cl.queuedJobs} waiting`);
    for (const l of nodeNotes(cl.servers)) out(l);
    const b = cl.buckets.filter((x) => x.rus > 0);
    if (b.length > 0) out(`admission buckets (free/RUs): ${b.map((x) => `#${x.id} ${x.free}/${x.rus}`).join('  ')}`);
  } finally {
    c.close();
  }
}

export async function explainCommand(id: string, o: ClientFlags & { json: boolean }, out: (s: string) => void): Promise<void> {
  const c = client(o);
  try {
    const e = await unary<Explanation__Output>(o.timeout, (opts, cb) => c.ExplainJob({ jobId: id }, opts, cb));
    out(o.json ? JSON.stringify(e, null, 2) : e.text);
  } finally {
    c.close();
  }
}

export async function cancelCommand(id: string, o: ClientFlags, out: (s: string) => void): Promise<void> {
  const c = client(o);
  try {
    const j = await unary<Job__Output>(o.timeout, (opts, cb) => c.CancelJob({ jobId: id }, opts, cb));
    out(FINAL.has(j.state) ? `${j.id} is already ${j.state}` : `cancelling ${j.id} (${j.state}); \`tarcil status ${j.id}\` shows when it has stopped`);
  } finally {
    c.close();
  }
}


/** `tarcil profile <name> --learned`: a class's declared and learned vectors, from a front-end. */
export async function learnedProfileCommand(name: string, o: ClientFlags & { json: boolean }, out: (s: string) => void): Promise<void> {
  const c = client(o);
  try {
    const p = await unary<ProfileEstimate__Output>(o.timeout, (opts, cb) => c.GetProfile({ name }, opts, cb));
    if (o.json) return out(JSON.stringify(p, null, 2));
    const names = loadCatalog().resources;
    const lines = [`profile ${p.name}: ${p.observations} observation(s)${p.observations > 0 ? `, gain ${p.gain.toFixed(2)}, rmse ${p.rmse.toFixed(3)}, updated ${new Date(p.updatedAtMs).toISOString()}` : ''}`];
    lines.push(
      p.used
        ? `new jobs of this class are scheduled with the learned vector (it rests on at least ${p.minObservations} observations)`
        : `new jobs of this class are scheduled with the declared vector (${p.observations < p.minObservations ? `the learned one is used from ${p.minObservations} observations on` : 'this front-end does not use learned profiles'})`,
    );
    const t = new Table({ head: ['resource', 'declared', 'learned', 'change'] });
    p.declared.forEach((d, i) => {
      const l = p.learned[i];
      t.push([names[i]?.id ?? String(i), d.toFixed(0), l === undefined ? '-' : l.toFixed(1), l === undefined ? '' : `${l - d >= 0 ? '+' : ''}${(l - d).toFixed(1)}`]);
    });
    lines.push(t.toString());
    out(lines.join('\n'));
  } finally {
    c.close();
  }
}
