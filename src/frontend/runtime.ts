/**
 * Process wiring of a front-end: its job manager and agents, the Scheduler gRPC service, metrics
 * and the dashboard, as `tarcil server` and `up` start them (startScheduler). A node's is
 * node/runtime.ts.
 */
import type { RuntimeLoopConfig } from '../monitor/runtime-loop.ts';
import type { AgentConfig } from '../agent/agent.ts';
import { JobManager } from '../owner/manager.ts';
import type { JobManagerOptions } from '../owner/context.ts';
import type { Catalog } from '../model/catalog.ts';
import { Housekeeper } from '../state/housekeeping.ts';
import type { Keys } from '../state/keys.ts';
import type { ClusterStore } from '../store/types.ts';
import type { Clock } from '../util/clock.ts';
import type { Logger } from '../util/log.ts';
import type { Rng } from '../util/rng.ts';
import { AuthLayer } from './auth.ts';
import { startGrpcServer, type TlsFiles } from '../rpc/grpc.ts';
import { Metrics } from './metrics.ts';
import { Dashboard, dashboardRefusal } from './dashboard/server.ts';
import { localNodes } from '../node/monitor-service.ts';
import { localMonitors } from '../node/runtime.ts';
import { GrpcNodeLink } from './node-link.ts';
import { checkSchedulerOptions, SERVER_DEFAULTS, type StreamLimits } from './options.ts';
import { loadProtos } from '../rpc/proto.ts';
import { SchedulerService } from './scheduler-service.ts';
import { NamespaceView } from '../tenancy/namespace-view.ts';
import { SEEN_REFRESH_MS } from '../owner/plan.ts';

export interface SchedulerProcessOptions {
  name: string;
  store: ClusterStore;
  keys: Keys;
  catalog: Catalog;
  clock: Clock;
  rng: Rng;
  log: Logger;
  agents: number;
  host: string;
  port: number;
  leaseTtlSeconds?: number;
  agentConfig?: Partial<AgentConfig>;
  tls?: TlsFiles;
  /** Client TLS towards the monitors. */
  nodeTls?: { caFile?: string; certFile?: string; keyFile?: string };
  /** Serve Prometheus metrics on this port (undefined: no endpoint; 0: any free port). */
  metricsPort?: number;
  /** Serve the live dashboard on this port (undefined: none; 0: any free port); see dashboard/server.ts. */
  httpPort?: number;
  /** The bearer token the dashboard asks browsers for (needed off loopback unless it has TLS). */
  httpToken?: string;
  /** How long down servers count as part of the cell, and how long a job waits for them (SERVER_DEFAULTS). */
  departedMemoryMs?: number;
  unplaceableTimeoutMs?: number;
  /** Back-pressure: tasks not yet placed above which submissions are refused (SERVER_DEFAULTS; 0: no limit). */
  maxPendingTasks?: number;
  /** A task still only placed this long after its commit is sent to its node's monitor (SERVER_DEFAULTS; 0: at once). */
  launchAfterMs?: number;
  /** What connections, calls and WatchJob streams may hold (STREAM_LIMIT_DEFAULTS). */
  streamLimits?: Partial<StreamLimits>;
  /** The run-time loop's rules for moving slow tasks of migratable jobs (monitor/runtime-loop.ts defaults). */
  runtime?: Partial<RuntimeLoopConfig>;
  /**
   * Learned profiles: use them for new jobs ('learned') or not ('declared'; default by
   * DEFAULT_RUNTIME.learn, `tarcil server --profiles`), after how many observations, how often
   * written. Observations are gathered and written either way, so a front-end that uses them finds them.
   */
  profiles?: JobManagerOptions['profiles'];
  /** Finished jobs are deleted this long after they end (default SERVER_DEFAULTS.retainMs; see state/retention.ts). */
  retainMs?: number;
  /** Compaction keeps this much history (default SERVER_DEFAULTS.compactMarginMs; 0: tarcil does not compact). */
  compactMarginMs?: number;
  /** Stand in the housekeeper election (retention and compaction); default true. */
  housekeeping?: boolean;
  /**
   * Listen as soon as submissions can be taken, before the cluster view of a large cell is loaded
   * (`tarcil server` does): jobs submitted meanwhile are persisted and acknowledged, and scheduled
   * once `ready` resolves. Without it startScheduler resolves only once it schedules.
   */
  listenBeforeReady?: boolean;
  /**
   * ACLs on (`tarcil server --acl`): every Scheduler call needs a token whose policy allows it
   * (auth.ts). Off by default: every call is allowed, as `anonymous`.
   */
  acl?: boolean;
  /** How long a token lookup is trusted before it is read again (default DEFAULT_TOKEN_CACHE_MS). */
  tokenCacheMs?: number;
}

export interface SchedulerProcess {
  port: number;
  metricsPort: number | undefined;
  /** The dashboard's port (undefined: not served). */
  httpPort: number | undefined;
  /** Why the dashboard was asked for and not served (off loopback with neither TLS nor token). */
  httpRefused: string | undefined;
  /** The dashboard's URL scheme: https with the front-end's TLS certificate. */
  httpScheme: 'http' | 'https';
  manager: JobManager;
  service: SchedulerService;
  metrics: Metrics;
  /** Retention and compaction, when this process leads the election (undefined: not standing). */
  housekeeper: Housekeeper | undefined;
  /** Resolves once the agents schedule (already resolved without listenBeforeReady). */
  ready: Promise<void>;
  close(): Promise<void>;
}

/** A front-end: the Scheduler gRPC service over a JobManager with N agents. */
export async function startScheduler(o: SchedulerProcessOptions): Promise<SchedulerProcess> {
  checkSchedulerOptions(o);
  // Monitors started in this process (`tarcil up`) are called directly (see LocalNodes).
  const nodes = new GrpcNodeLink({ ...(o.nodeTls ? { tls: o.nodeTls } : {}), local: localNodes });
  const hooks: { metrics?: Metrics; dashboard?: Dashboard } = {};
  const manager = new JobManager({
    process: o.name,
    store: o.store,
    keys: o.keys,
    clock: o.clock,
    rng: o.rng,
    log: o.log.child({ component: 'jobs' }),
    agents: o.agents,
    ...(o.agentConfig ? { agentConfig: o.agentConfig } : {}),
    ...(o.leaseTtlSeconds !== undefined ? { leaseTtlSeconds: o.leaseTtlSeconds } : {}),
    ...(o.departedMemoryMs !== undefined ? { departedMemoryMs: o.departedMemoryMs } : {}),
    ...(o.unplaceableTimeoutMs !== undefined ? { unplaceableTimeoutMs: o.unplaceableTimeoutMs } : {}),
    // The job records' `seen` moves on well inside the history compaction keeps (state/ru-history.ts).
    ...(o.compactMarginMs ? { seenRefreshMs: Math.min(SEEN_REFRESH_MS, Math.floor(o.compactMarginMs / 3)) } : {}),
    ...(o.maxPendingTasks !== undefined ? { maxPendingTasks: o.maxPendingTasks } : {}),
    ...(o.launchAfterMs !== undefined ? { launchAfterMs: o.launchAfterMs } : {}),
    ...(o.runtime ? { runtime: o.runtime } : {}),
    ...(o.profiles ? { profiles: o.profiles } : {}),
    nodes,
    onDecision: (job, rec) => hooks.metrics?.observeDecision(job.submittedAt, rec),
    onCommitted: (job, placements, agent) => {
      hooks.metrics?.observePlacements(agent, placements);
    },
    onJobFinished: (_job, state) => hooks.metrics?.observeFinished(state),
  });
  // The monitors of this process (`tarcil up`) export their node metrics here too.
  // The housekeeper starts once the manager has; /metrics reads it through this holder.
  const held: { housekeeper?: Housekeeper } = {};
  const metrics = new Metrics({ manager, store: o.store, keys: o.keys, monitors: () => localMonitors, housekeeper: () => held.housekeeper });
  hooks.metrics = metrics;
  let serving: () => void = () => undefined;
  const canServe = new Promise<void>((resolve) => (serving = resolve));
  const ready = manager.start({ onServing: () => serving() });
  ready.catch(() => undefined);
  await (o.listenBeforeReady ? Promise.race([canServe, ready]) : ready);
  const retainMs = o.retainMs ?? SERVER_DEFAULTS.retainMs;
  const housekeeper =
    o.housekeeping === false
      ? undefined
      : new Housekeeper({
          store: o.store,
          keys: o.keys,
          clock: o.clock,
          log: o.log.child({ component: 'housekeeper' }),
          process: o.name,
          retainMs,
          ...(o.compactMarginMs !== undefined ? { compactMarginMs: o.compactMarginMs } : {}),
        });
  if (housekeeper) held.housekeeper = housekeeper;
  housekeeper?.start();
  const auth = new AuthLayer({
    acl: o.acl ?? false,
    store: o.store,
    keys: o.keys,
    clock: o.clock,
    log: o.log.child({ component: 'audit' }),
    certAuth: o.tls?.caFile !== undefined,
    ...(o.tokenCacheMs !== undefined ? { cacheTtlMs: o.tokenCacheMs } : {}),
  });
  // Submissions read their namespace from this copy rather than from the store first.
  const namespaces = new NamespaceView({ store: o.store, keys: o.keys, clock: o.clock, log: o.log.child({ component: 'namespaces' }) });
  await namespaces.start();
  const service = new SchedulerService({
    manager,
    namespaces,
    store: o.store,
    keys: o.keys,
    catalog: o.catalog,
    clock: o.clock,
    log: o.log,
    metrics,
    retainMs,
    process: o.name,
    readLog: (endpoint, req) => nodes.readLog(endpoint, req),
    onTokenChanged: (accessor) => auth.forget(accessor),
    ...(o.streamLimits ? { watchLimits: o.streamLimits } : {}),
  });
  const grpcServer = await startGrpcServer({
    log: o.log,
    ...(o.streamLimits ? { limits: o.streamLimits } : {}),
    host: o.host,
    port: o.port,
    ...(o.tls ? { tls: o.tls } : {}),
    register: (server) => {
      server.addService(loadProtos().proto.tarcil.v1.Scheduler.service, auth.wrap(service.handlers()));
      return ['tarcil.v1.Scheduler'];
    },
  }).catch(async (err: unknown) => {
    await namespaces.close();
    throw err;
  });
  const close = async (): Promise<void> => {
    await grpcServer.close(1000);
    await namespaces.close();
    await housekeeper?.close();
    await manager.close();
    nodes.close();
    await metrics.close();
    await hooks.dashboard?.close();
  };
  let metricsPort: number | undefined;
  let httpPort: number | undefined;
  const httpTls = o.tls ? { certFile: o.tls.certFile, keyFile: o.tls.keyFile } : undefined;
  const dashOptions = { host: o.host, port: o.httpPort ?? 0, ...(httpTls ? { tls: httpTls } : {}), ...(o.httpToken ? { token: o.httpToken } : {}) };
  const httpRefused = o.httpPort !== undefined ? dashboardRefusal(dashOptions) : undefined;
  try {
    metricsPort = o.metricsPort !== undefined ? await metrics.listen(o.host, o.metricsPort) : undefined;
    if (o.httpPort !== undefined && !httpRefused) {
      const dashboard = new Dashboard({
        manager,
        store: o.store,
        keys: o.keys,
        metrics,
        log: o.log.child({ component: 'dashboard' }),
        job: (id) => service.getJob(id, true),
        explain: (id) => service.explain(id),
        taskLogs: service.handlers().TaskLogs,
      });
      hooks.dashboard = dashboard;
      httpPort = await dashboard.listen(dashOptions);
    }
  } catch (err) {
    // A port that is taken: nothing of this front-end is left running.
    await close().catch(() => undefined);
    throw err;
  }
  if (httpRefused) o.log.warn({ host: o.host }, httpRefused);
  o.log.info({ port: grpcServer.port, acl: auth.enabled, agents: o.agents, lease: manager.leaseId, metricsPort, httpPort }, 'scheduler listening');
  return {
    port: grpcServer.port,
    metricsPort,
    httpPort,
    httpRefused,
    httpScheme: httpTls ? 'https' : 'http',
    manager,
    service,
    metrics,
    housekeeper,
    ready,
    close,
  };
}
