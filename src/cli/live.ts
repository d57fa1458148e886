/**
 * What the daemons do: `tarcil server` (a front-end), `tarcil monitor` (a node) and `tarcil up`
 * (both in one process), from opening the store to the shutdown on a signal. The client commands
 * are in client.ts.
 */
import { hostname } from 'node:os';
import { dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { expandCluster, loadCatalog, resolveCluster, type Catalog } from '../model/catalog.ts';
import { attributesSchema, toIssues } from '../model/schema.ts';
import type { ServerSpec } from '../model/types.ts';
import { parseAgentOptions } from '../agent/config.ts';
import { UP_DEFAULTS } from '../frontend/options.ts';
import { journalDirFor } from '../monitor/options.ts';
import { startScheduler, type SchedulerProcess } from '../frontend/runtime.ts';
import { startMonitor, type MonitorProcess } from '../node/runtime.ts';
import { openStore } from '../store/index.ts';
import { Keys } from '../state/keys.ts';
import type { ClusterStore } from '../store/types.ts';
import { SystemClock } from '../util/clock.ts';
import { dict } from '../util/dict.ts';
import { errorMessage, invalid, isTarcilError, isTransient, TarcilError } from '../util/errors.ts';
import { createLogger, type Logger } from '../util/log.ts';
import { installFaultPolicy } from '../util/faults.ts';
import { watchStalls } from '../util/stalls.ts';
import { SeededRng } from '../util/rng.ts';
import { errorText } from './exit-codes.ts';
import { nextSteps, packageRoot } from './banner-hints.ts';
import { fmtMs, STORE_RETRY_MS, streamLimitsOf } from './flags.ts';
import type { ProfileUse } from '../state/profiles.ts';

export interface StoreFlags {
  store: string;
  prefix: string;
  etcdCa?: string;
  etcdCert?: string;
  etcdKey?: string;
  /** --etcd-max-txn-ops: the etcd server's --max-txn-ops, when it is not the default. */
  etcdMaxTxnOps?: number;
  /**
   * --wait-for-store: how long a daemon tries again when the store does not answer at start (ms;
   * Infinity: until it answers). Undefined: it does not wait, it stops with the reason.
   */
  waitForStore?: number;
}

/** `--log-level` (or $TARCIL_LOG). */
export interface LogFlags {
  logLevel: string;
}

export interface TlsFlags {
  tlsCert?: string;
  tlsKey?: string;
  tlsCa?: string;
}

/** Opens the store; an etcd store once etcd answers, within dialTimeoutMs (default the store's, 5 s). */
async function open(o: StoreFlags, dialTimeoutMs?: number): Promise<ClusterStore> {
  const tls =
    o.etcdCa || o.etcdCert || o.etcdKey
      ? { ...(o.etcdCa ? { caFile: o.etcdCa } : {}), ...(o.etcdCert ? { certFile: o.etcdCert } : {}), ...(o.etcdKey ? { keyFile: o.etcdKey } : {}) }
      : undefined;
  return openStore(o.store, {
    ...(tls ? { tls } : {}),
    ...(dialTimeoutMs !== undefined ? { dialTimeoutMs } : {}),
    ...(o.etcdMaxTxnOps !== undefined ? { maxTxnOps: o.etcdMaxTxnOps } : {}),
  });
}

/** How long one try waits for etcd to answer (the store's own dial timeout). */
const DIAL_TIMEOUT_MS = 5000;

const secs = (ms: number): string => `${Math.round(ms / 1000)} s`;

/**
 * Opens a daemon's store (`tarcil server`, `monitor`, `up`, `hollow`). A store that does not
 * answer stops the start with a message that names the command and the endpoints (exit code 4,
 * unavailable); with `--wait-for-store` the daemon says so on stderr and tries again every
 * STORE_RETRY_MS until the store answers or the wait's limit has passed.
 */
export async function openDaemonStore(who: string, o: StoreFlags, say: (line: string) => void = (l) => process.stderr.write(`${l}\n`)): Promise<ClusterStore> {
  const started = Date.now();
  const limit = o.waitForStore;
  for (let attempt = 1; ; attempt++) {
    try {
      // A try never runs past the wait's limit.
      const left = limit === undefined ? Infinity : limit - (Date.now() - started);
      const store = await open(o, left < DIAL_TIMEOUT_MS ? Math.max(1000, left) : undefined);
      if (attempt > 1) say(`tarcil ${who}: the store answers (${o.store}), after ${secs(Date.now() - started)} of waiting`);
      return store;
    } catch (err) {
      if (!isTarcilError(err) || err.code === 'INVALID_ARGUMENT') throw err;
      const why = errorText(err);
      const cannot = `tarcil ${who} cannot start: ${why}`;
      const code = err.code;
      if (!isTransient(err)) throw new TarcilError(code, cannot, { cause: err });
      const waited = Date.now() - started;
      if (limit === undefined) throw new TarcilError(code, `${cannot}; is etcd running there? (--wait-for-store waits until it answers)`, { cause: err });
      if (waited + STORE_RETRY_MS >= limit)
        throw new TarcilError(code, `${cannot}; gave up after waiting ${secs(waited)} (--wait-for-store ${fmtMs(limit)})`, { cause: err });
      say(`tarcil ${who}: waiting for the store: ${why}; trying again in ${secs(STORE_RETRY_MS)} (attempt ${attempt}, ${secs(waited)} so far)`);
      await new Promise((resolve) => setTimeout(resolve, STORE_RETRY_MS));
    }
  }
}

/**
 * A daemon that cannot listen where it is told to (its port taken, an address not on this machine,
 * a port below 1024 without the right) stops with that reason rather than a stack trace.
 */
export function startFailure(who: string, err: unknown): unknown {
  if (isTarcilError(err)) return err;
  const m = errorMessage(err);
  return /EADDRINUSE|EADDRNOTAVAIL|EACCES/.test(m) ? new TarcilError('FAILED_PRECONDITION', `tarcil ${who} cannot start: ${m}`, { cause: err }) : err;
}

/**
 * Holds the process open while a daemon starts, until it runs under runUntilSignal. The store's
 * and the components' timers are unref()'d, so while nothing listens yet nothing else would: a
 * start waiting on a store that does not answer would end in a silent exit (code 13, an
 * unsettled top-level await) instead of its message.
 */
export function holdOpen(): () => void {
  const t = setInterval(() => undefined, 1 << 30);
  return () => clearInterval(t);
}

export function serverTls(o: TlsFlags): { certFile: string; keyFile: string; caFile?: string } | undefined {
  if (!o.tlsCert && !o.tlsKey) return undefined;
  if (!o.tlsCert || !o.tlsKey) throw invalid(o.tlsCert ? '--tls-key' : '--tls-cert', 'is required with the other TLS flag');
  return { certFile: o.tlsCert, keyFile: o.tlsKey, ...(o.tlsCa ? { caFile: o.tlsCa } : {}) };
}

/**
 * Runs until SIGINT/SIGTERM, then closes everything in order (gRPC, owners' leases revoked so
 * other processes adopt at once, monitors' tasks killed and leases revoked) before exiting.
 * `started` prints the daemon's banner once the signals are handled, so that a script that stops
 * the daemon as soon as the banner appears stops it in order.
 */
export async function runUntilSignal(log: Logger, close: () => Promise<void>, started: () => void = () => undefined): Promise<void> {
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
    started();
  });
  clearInterval(keepAlive);
  stalls.stop();
}

export interface ServerFlags extends StoreFlags, TlsFlags, LogFlags {
  agents: number;
  host: string;
  port: number;
  leaseTtl: number;
  metricsPort?: number;
  /** The live dashboard's port, and the token it asks browsers for. */
  httpPort?: number;
  httpToken?: string;
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
  launchAfter: number;
  maxPendingTasks: number;
  /** ACLs on: every call needs an access token (`tarcil acl`). */
  acl?: boolean;
  /** --profiles: new jobs scheduled with declared or learned profiles (default by DEFAULT_RUNTIME.learn). */
  profiles: ProfileUse;
}

export async function serverCommand(o: ServerFlags): Promise<void> {
  const log = createLogger('tarcil-server', o.logLevel);
  // Checked before anything starts: a bad option names itself and the rule (exit code 2).
  const agentOptions = parseAgentOptions(o.agent ?? []);
  const release = holdOpen();
  try {
    await runServer(o, log, agentOptions);
  } catch (err) {
    throw startFailure('server', err);
  } finally {
    release();
  }
}

async function runServer(o: ServerFlags, log: Logger, agentOptions: ReturnType<typeof parseAgentOptions>): Promise<void> {
  const store = await openDaemonStore('server', o);
  installFaultPolicy(log, { who: 'server', embedded: o.store.startsWith('memory:') });
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
    ...(o.httpPort !== undefined ? { httpPort: o.httpPort } : {}),
    ...(o.httpToken ? { httpToken: o.httpToken } : {}),
    retainMs: o.retain,
    compactMarginMs: o.compactMargin,
    departedMemoryMs: o.departedMemory,
    unplaceableTimeoutMs: o.unplaceableTimeout,
    launchAfterMs: o.launchAfter,
    maxPendingTasks: o.maxPendingTasks,
    streamLimits: streamLimitsOf(o),
    listenBeforeReady: true,
    acl: o.acl === true,
    profiles: { use: o.profiles },
  });
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
  await runUntilSignal(
    log,
    async () => {
      stopping = true;
      await sched.close();
      await store.close();
    },
    // One line on stdout that scripts (and the end-to-end test) wait for.
    () =>
      process.stdout.write(
        `tarcil server listening on ${o.host}:${sched.port}${sched.metricsPort !== undefined ? `, metrics on :${sched.metricsPort}/metrics` : ''}${sched.httpPort !== undefined ? `, dashboard on ${dashboardUrl(o.host, sched)}` : ''}\n${sched.httpRefused ? `tarcil server: ${sched.httpRefused}\n` : ''}${aclLine(o)}`,
      ),
  );
}

/** What the server's banner says of access control. */
function aclLine(o: ServerFlags): string {
  if (o.acl) return 'tarcil server: ACLs on: every call needs a token (`tarcil acl bootstrap` makes the first one)\n';
  const loopback = o.host === 'localhost' || o.host.startsWith('127.') || o.host === '::1';
  return loopback ? '' : `tarcil server: ACLs off: any client that reaches ${o.host}:${o.port} may do anything (--acl turns them on)\n`;
}

/** Where a browser finds the dashboard of a front-end listening on `host`. */
function dashboardUrl(host: string, sched: SchedulerProcess): string {
  return `${sched.httpScheme}://${host === '0.0.0.0' ? '127.0.0.1' : host}:${sched.httpPort}/`;
}

export interface MonitorFlags extends StoreFlags, TlsFlags, LogFlags {
  /** The node's id (`--node`; `--server`, deprecated, sets it too). */
  node: string;
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
  /** --block / --no-block: the server is blocked while a task runs slow (default DEFAULT_RUNTIME.block). */
  block: boolean;
}

/**
 * Server attributes from `--attr key=value` flags, checked by the rules of a cluster file's
 * attributes (model/schema.ts): a name such as `__proto__` is refused, not silently lost.
 */
export function attributesFromFlags(pairs: readonly string[]): Record<string, string> {
  const attributes = dict<string>();
  for (const a of pairs) {
    const eq = a.indexOf('=');
    if (eq <= 0) throw invalid('--attr', `"${a}" must be key=value`);
    attributes[a.slice(0, eq)] = a.slice(eq + 1);
  }
  const r = attributesSchema.safeParse(attributes);
  if (!r.success)
    throw invalid(
      '--attr',
      toIssues(r.error.issues)
        .map((i) => (i.field === '(root)' ? i.rule : `${i.field}: ${i.rule}`))
        .join('; '),
    );
  return attributes;
}

export async function monitorCommand(o: MonitorFlags): Promise<void> {
  const log = createLogger('tarcil-monitor', o.logLevel);
  const catalog = loadCatalog();
  const platform = catalog.platforms.get(o.platform);
  if (!platform) throw invalid('--platform', `unknown platform '${o.platform}' (known: ${[...catalog.platforms.keys()].join(', ')})`);
  const attributes = attributesFromFlags(o.attr);
  const spec: ServerSpec = { id: o.node, platform: o.platform, rack: o.rack, rus: o.rus ?? platform.cores, speed: platform.speed, attributes };
  const release = holdOpen();
  try {
    await runMonitor(o, log, spec);
  } catch (err) {
    throw startFailure('monitor', err);
  } finally {
    release();
  }
}

async function runMonitor(o: MonitorFlags, log: Logger, spec: ServerSpec): Promise<void> {
  const store = await openDaemonStore('monitor', o);
  installFaultPolicy(log, { who: 'monitor', embedded: o.store.startsWith('memory:') });
  const tls = serverTls(o);
  // The outcome journal and the grace, handed by startMonitor to the LocalMonitor.
  const settings = {
    journalDir: o.journalDir ?? journalDirFor(o.logDir),
    ...(o.disconnectGrace !== undefined ? { disconnectGraceMs: o.disconnectGrace } : {}),
  };
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
    block: o.block,
    ...(o.metricsPort !== undefined ? { metricsPort: o.metricsPort } : {}),
    ...(tls ? { tls } : {}),
    ...settings,
  });
  await runUntilSignal(
    log,
    async () => {
      await m.close();
      await store.close();
    },
    () =>
      process.stdout.write(
        `tarcil monitor ${spec.id} (${spec.platform}, ${spec.rus} RUs, ${o.executor}) listening on ${o.host}:${m.port}${m.metricsPort !== undefined ? `, metrics on :${m.metricsPort}/metrics` : ''}; ` +
          `outcome journal ${m.monitor.journalLocation}, disconnect grace ${m.monitor.disconnectGraceMs / 1000} s\n`,
      ),
  );
}

export interface UpFlags extends StoreFlags, TlsFlags, LogFlags {
  cluster: string;
  agents: number;
  host: string;
  port: number;
  metricsPort: number;
  httpPort: number;
  httpToken?: string;
  executor: 'simulated' | 'process';
  logDir: string;
  retain: number;
  compactMargin: number;
  /** Agent options as key=value (see agent/config.ts), as `tarcil server --agent`. */
  agent?: string[];
  /** The monitors' blocks (--block / --no-block) and the front-end's profiles (--profiles), as for `tarcil monitor` and `server`. */
  block: boolean;
  profiles: ProfileUse;
}

/** Everything in one process: monitors of a demo cluster, N agents, the front-end. */
export async function upCommand(o: UpFlags): Promise<void> {
  const log = createLogger('tarcil', o.logLevel);
  const catalog = loadCatalog();
  const servers = expandCluster(resolveCluster(o.cluster, catalog), catalog.platforms);
  const release = holdOpen();
  try {
    await runUp(o, log, catalog, servers);
  } catch (err) {
    throw startFailure('up', err);
  } finally {
    release();
  }
}

async function runUp(o: UpFlags, log: Logger, catalog: Catalog, servers: ServerSpec[]): Promise<void> {
  const store = await openDaemonStore('up', o);
  installFaultPolicy(log, { who: 'up', embedded: o.store.startsWith('memory:') });
  const keys = new Keys(o.prefix);
  const clock = new SystemClock();
  const monitors: MonitorProcess[] = [];
  for (const s of servers) {
    monitors.push(
      await startMonitor({
        store,
        keys,
        clock,
        log,
        server: s,
        executor: o.executor,
        host: '127.0.0.1',
        port: 0,
        logDir: o.logDir,
        leaseTtlSeconds: UP_DEFAULTS.leaseTtlSeconds,
        block: o.block,
      }),
    );
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
      ...(o.agent?.length ? { agentConfig: parseAgentOptions(o.agent) } : {}),
      metricsPort: o.metricsPort,
      httpPort: o.httpPort,
      ...(o.httpToken ? { httpToken: o.httpToken } : {}),
      retainMs: o.retain,
      compactMarginMs: o.compactMargin,
      streamLimits: streamLimitsOf(o),
      profiles: { use: o.profiles },
      ...(tls ? { tls } : {}),
    });
  } catch (err) {
    await Promise.all(monitors.map((m) => m.close()));
    throw err;
  }
  const rus = servers.reduce((a, s) => a + s.rus, 0);
  const addr = `${o.host === '0.0.0.0' ? '127.0.0.1' : o.host}:${sched.port}`;
  const out = (l: string): boolean => process.stdout.write(`${l}\n`);
  const banner = (): void => {
    out(`tarcil up: cluster ${o.cluster} (${servers.length} servers, ${rus} RUs, ${o.executor} executor), ${o.agents} agents, store ${o.store}`);
    if (o.store.startsWith('memory:')) out('  state            in this process only (memory://): its jobs end with it; --store etcd://host:2379 keeps them');
    out(`  Scheduler gRPC   ${addr}   (reflection and grpc.health.v1 enabled)`);
    out('  access           ACLs off (loopback, zero configuration; `tarcil server --acl` turns them on)');
    if (sched.metricsPort !== undefined) out(`  metrics          http://${o.host === '0.0.0.0' ? '127.0.0.1' : o.host}:${sched.metricsPort}/metrics`);
    if (sched.httpPort !== undefined) out(`  dashboard        ${dashboardUrl(o.host, sched)}${o.httpToken ? '   (open it with ?token=<the token>)' : ''}`);
    if (sched.httpRefused) out(`  dashboard        off: ${sched.httpRefused}`);
    out('');
    out(`In another terminal${process.cwd() === '/' ? '' : ` (from ${process.cwd()})`}:`);
    for (const l of nextSteps(packageRoot(dirname(fileURLToPath(import.meta.url))), process.cwd())) out(`  ${l}`);
    out(`(add --server ${addr} if you changed the port; Ctrl-C stops everything)`);
  };
  await runUntilSignal(
    log,
    async () => {
      await sched.close();
      await Promise.all(monitors.map((m) => m.close()));
      await store.close();
    },
    banner,
  );
}
