/**
 * Prometheus metrics of one process (`/metrics`) and its health endpoints (`/healthz`, `/readyz`).
 * Counters are fed by the job manager's hooks; gauges are read from the agents' shared view, the
 * owned jobs and the monitors when scraped, so nothing runs on the scheduling path. Process and
 * Node.js metrics carry their standard names (`process_cpu_seconds_total`,
 * `nodejs_eventloop_lag_p99_seconds`, …), as prom-client's collectDefaultMetrics names them.
 */
import { createServer, type Server } from 'node:http';
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { DecisionRecord } from '../agent/agent.ts';
import type { JobManager } from '../agent/lifecycle.ts';
import type { JobState } from '../model/types.ts';
import type { Placement } from '../state/decisions.ts';
import type { Housekeeper } from '../state/housekeeping.ts';
import type { HollowNodes, HollowSnapshot } from '../monitor/hollow.ts';
import { MONITOR_EVENTS, type LocalMonitor, type MonitorSnapshot } from '../monitor/monitor.ts';
import type { Keys } from '../state/keys.ts';
import type { ClusterStore } from '../store/types.ts';
import { errorMessage } from '../util/errors.ts';

/**
 * Buckets of the latency and wait histograms, in seconds: a millisecond to 30 minutes. A job may
 * wait minutes for capacity or admission; a top bucket of seconds would put all of it in +Inf.
 */
export const DURATION_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800];

/** How long /readyz waits for the store before it calls it unreachable. */
export const READY_STORE_TIMEOUT_MS = 2000;

/** Why the process is not ready; an empty list means ready. */
export type ReadinessCheck = () => Promise<string[]>;

/** Buckets of the store's request times: 0.5 ms to 4 s, doubling (etcd's own disk histograms use the same). */
const STORE_REQUEST_BUCKETS = Array.from({ length: 14 }, (_, i) => 0.0005 * 2 ** i);

/**
 * `tarcil_store_request_seconds`: this process's requests to etcd, each from sending to its
 * answer, by kind (read, write): the store's latency as the scheduler sees it, next to etcd's own
 * handling time (etcd's `grpc_server_handling_seconds` with `--metrics extensive`).
 */
function registerStoreTimes(registry: Registry, store: ClusterStore | undefined): void {
  if (!store?.onRequestTime) return;
  const h = new Histogram({
    name: 'tarcil_store_request_seconds',
    help: "This process's requests to etcd, from sending to the answer (a wait for a slot under the in-flight limit not counted), by kind: write (transactions, puts, deletes, compactions), read (gets, ranges, read-only transactions)",
    labelNames: ['kind'],
    buckets: STORE_REQUEST_BUCKETS,
    registers: [registry],
  });
  store.onRequestTime((kind, seconds) => h.observe({ kind }, seconds));
}

/**
 * `tarcil_store_watch_events_total`: events etcd delivered to this process's watches, by the kind
 * of record watched (the key segment after the cell's prefix: rus, tasks, jobs, …). Counted from
 * the process's start.
 */
function registerWatchEvents(registry: Registry, store: ClusterStore | undefined, keys: Keys | undefined): void {
  if (!store?.countWatchEvents || !keys) return;
  const read = store.countWatchEvents((prefix) => (keys.tail(keys.prefix, prefix) ?? '').split('/')[0] || 'other');
  new Counter({
    name: 'tarcil_store_watch_events_total',
    help: "Events etcd delivered to this process's watches, by the kind of record watched (the key segment after the cell's prefix)",
    labelNames: ['kind'],
    registers: [registry],
    collect() {
      this.reset();
      for (const [kind, n] of read()) this.inc({ kind }, n);
    },
  });
}

/** A Prometheus registry with the process's default metrics, and the HTTP endpoint that serves it with /healthz and /readyz. */
abstract class MetricsEndpoint {
  readonly registry = new Registry();
  private server: Server | undefined;

  constructor() {
    collectDefaultMetrics({ register: this.registry });
  }

  /** What /readyz checks (see serveRegistry). */
  protected abstract notReady(): Promise<string[]>;

  /** Serves /metrics, /healthz and /readyz on host:port; resolves with the bound port. */
  async listen(host: string, port: number): Promise<number> {
    const { server, port: bound } = await serveRegistry(this.registry, host, port, () => this.notReady());
    this.server = server;
    return bound;
  }

  /** The /readyz verdict, for tests and callers in the same process. */
  readiness(): Promise<string[]> {
    return this.notReady();
  }

  close(): Promise<void> {
    const s = this.server;
    this.server = undefined;
    return closeServer(s);
  }
}

/** The store answers a read within READY_STORE_TIMEOUT_MS: nothing, or why not. */
export async function storeReachable(store: ClusterStore, timeoutMs = READY_STORE_TIMEOUT_MS): Promise<string[]> {
  let timer: NodeJS.Timeout | undefined;
  try {
    await Promise.race([
      store.revision(),
      new Promise((_, reject) => {
        timer = setTimeout(() => reject(new Error(`no answer within ${timeoutMs} ms`)), timeoutMs);
      }),
    ]);
    return [];
  } catch (err) {
    return [`store unreachable: ${errorMessage(err)}`];
  } finally {
    clearTimeout(timer);
  }
}

export interface MetricsOptions {
  manager: JobManager;
  /** Checked by /readyz. */
  store?: ClusterStore;
  /** Monitors running in this process (`tarcil up`): their node metrics are exported here too. */
  monitors?: () => Iterable<LocalMonitor>;
  /** This process's housekeeper (retention and compaction), when it runs one. */
  housekeeper?: () => HousekeeperView | undefined;
  /** The cell's keys: watch events are counted by the kind of record (tarcil_store_watch_events_total). */
  keys?: Keys;
}

/** What /metrics reads of a housekeeper. */
type HousekeeperView = Pick<Housekeeper, 'leading' | 'stats' | 'retention'>;

/** States of `tarcil_rus`: free (takes placements), busy (or reserved), down, and free RUs of servers that take no placements (blocked by the load monitor, cordoned or draining). */
export const RU_STATES = ['free', 'busy', 'down', 'unschedulable'] as const;

/** A gauge whose value is read from `read` at each scrape. */
function readGauge(registry: Registry, name: string, help: string, read: () => number): void {
  new Gauge({
    name,
    help,
    registers: [registry],
    collect() {
      this.set(read());
    },
  });
}

export class Metrics extends MetricsEndpoint {
  readonly submitted = new Counter({ name: 'tarcil_jobs_submitted_total', help: 'Jobs acknowledged by this front-end', registers: [this.registry] });
  readonly rejected = new Counter({ name: 'tarcil_jobs_rejected_total', help: 'Job specs rejected as invalid', registers: [this.registry] });
  readonly finished = new Counter({
    name: 'tarcil_jobs_finished_total',
    help: 'Jobs owned by this front-end that ended, by outcome (succeeded, failed, cancelled)',
    labelNames: ['outcome'],
    registers: [this.registry],
  });
  readonly decisions = new Counter({ name: 'tarcil_decisions_total', help: 'Scheduling decisions completed (one per schedule call), by agent', labelNames: ['agent'], registers: [this.registry] });
  readonly conflicts = new Counter({ name: 'tarcil_commit_conflicts_total', help: 'Optimistic commits that lost a race, by agent', labelNames: ['agent'], registers: [this.registry] });
  readonly placements = new Counter({
    name: 'tarcil_tasks_placed_total',
    help: 'Tasks placed, by agent and by the platform of the server they went to',
    labelNames: ['agent', 'platform'],
    registers: [this.registry],
  });
  readonly sampleSize = new Histogram({
    name: 'tarcil_sample_size',
    help: 'Sample size R per attempt, by agent',
    labelNames: ['agent'],
    buckets: [2, 4, 8, 16, 32, 64, 128],
    registers: [this.registry],
  });
  readonly admissionWait = new Histogram({
    name: 'tarcil_admission_wait_seconds',
    help: 'Time jobs spent queued by admission control, by agent',
    labelNames: ['agent'],
    buckets: DURATION_BUCKETS,
    registers: [this.registry],
  });
  readonly latency = new Histogram({
    name: 'tarcil_scheduling_latency_seconds',
    help: 'Submission to the last placement of a schedule call, by agent',
    labelNames: ['agent'],
    buckets: DURATION_BUCKETS,
    registers: [this.registry],
  });
  private readonly manager: JobManager | undefined;
  private readonly store: ClusterStore | undefined;

  constructor(o?: MetricsOptions) {
    super();
    this.manager = o?.manager;
    this.store = o?.store;
    registerStoreTimes(this.registry, o?.store);
    registerWatchEvents(this.registry, o?.store, o?.keys);
    if (o?.monitors) registerMonitorMetrics(this.registry, o.monitors);
    const hk = o?.housekeeper;
    if (hk) {
      const gauge = (name: string, help: string, read: (h: HousekeeperView) => number): void =>
        readGauge(this.registry, name, help, () => {
          const h = hk();
          return h ? read(h) : 0;
        });
      gauge('tarcil_housekeeper_leading', '1 while this front-end is the elected housekeeper (it runs retention and compaction), else 0', (h) => (h.leading ? 1 : 0));
      gauge('tarcil_housekeeper_elections', 'Times this front-end was elected housekeeper', (h) => h.stats.elected);
      gauge('tarcil_housekeeper_stuck_waits', 'Times this front-end found its wait in the housekeeper election stuck (not elected though nobody else led) and stood again', (h) => h.stats.stuck);
      gauge('tarcil_housekeeper_compacted_revision', "The store revision this front-end last compacted etcd's history to (0: none)", (h) => h.stats.compactedTo);
      gauge('tarcil_retention_sweeps', 'Retention sweeps this front-end ran as housekeeper', (h) => h.retention.totals.sweeps);
      gauge('tarcil_retention_jobs_deleted', 'Finished jobs this front-end deleted as housekeeper, past their retention', (h) => h.retention.totals.jobs);
    }
    const limit = o?.store?.inFlightLimit;
    if (limit) {
      new Gauge({
        name: 'tarcil_store_requests',
        help: "This process's requests to etcd, by state: in_flight, queued (waiting in the process for a slot), limit (slots now: it shrinks while etcd answers slowly or times out and grows back as it answers promptly)",
        labelNames: ['state'],
        registers: [this.registry],
        collect() {
          const st = limit.stats();
          this.set({ state: 'in_flight' }, st.inFlight);
          this.set({ state: 'queued' }, st.queued);
          this.set({ state: 'limit' }, st.limit);
        },
      });
      new Counter({
        name: 'tarcil_store_limit_decreases_total',
        help: 'Times the limit on requests in flight to etcd was cut because etcd answered slowly or timed out, since the process started',
        registers: [this.registry],
        collect() {
          this.reset();
          this.inc(limit.stats().decreases);
        },
      });
      new Counter({
        name: 'tarcil_store_requests_shed_total',
        help: 'Requests to etcd failed unsent (UNAVAILABLE) because they waited longer than 10 s for a slot under the limit, since the process started',
        registers: [this.registry],
        collect() {
          this.reset();
          this.inc(limit.stats().shed);
        },
      });
    }
    const manager = o?.manager;
    if (!manager) return;
    const read = (name: string, help: string, value: () => number): void => {
      new Gauge({
        name,
        help,
        registers: [this.registry],
        collect() {
          this.set(value());
        },
      });
    };
    read('tarcil_owned_jobs', 'Jobs owned by this process', () => manager.ownedJobs().length);
    read(
      'tarcil_scheduling',
      '1 once this front-end places tasks (its view of the cell is loaded), 0 while it only takes submissions',
      () => (manager.started ? 1 : 0),
    );
    read(
      'tarcil_owner_leases_fenced',
      'Times the store said this process\'s owner lease was gone (expired or revoked), so that it gave up its jobs, since it started',
      () => manager.stats.fencedLeases,
    );
    read('tarcil_owner_lease_pauses', 'Times this process paused its jobs because no keepalive of its owner lease was confirmed within the TTL (it resumes them if the store still holds the lease), since it started', () => manager.stats.leasePauses);
    read('tarcil_commits', "Placement transactions this process's agents sent, those that conflicted included (tarcil_commit_conflicts_total), since it started", () => manager.agents.reduce((n, a) => n + a.stats.commits, 0));
    read('tarcil_jobs_adopted', 'Jobs this process took up from an owner whose lease had expired, since it started', () => manager.stats.adopted);
    read(
      'tarcil_launch_calls',
      "LaunchTask calls sent to nodes' monitors for tasks they had not recorded running --launch-after after the commit (every placement with 0), since it started",
      () => manager.stats.launches,
    );
    read('tarcil_adoptions_queued', 'Orphaned jobs waiting for one of the few adoption slots', () => manager.adoptions.queued);
    new Counter({
      name: 'tarcil_freed_handoffs_total',
      help: 'Freed RUs whose server has another front-end as its home (several front-ends with tasks to place; --agent handoffMs): held back for the window (handed-off), then woken for here because still free (woken-after-window) or taken meanwhile (taken-meanwhile), since the process started',
      labelNames: ['outcome'],
      registers: [this.registry],
      collect() {
        this.reset();
        const h = manager.view.handoff.stats;
        this.inc({ outcome: 'handed-off' }, h.handedOff);
        this.inc({ outcome: 'woken-after-window' }, h.wokenAfterWindow);
        this.inc({ outcome: 'taken-meanwhile' }, h.takenMeanwhile);
      },
    });
    read('tarcil_handoff_front_ends', 'Front-ends with tasks to place, this one included, as this one sees them (each server has its home among them)', () => manager.view.handoff.memberCount());
    new Counter({
      name: 'tarcil_task_moves_total',
      help: 'Slow tasks of migratable and scale-out jobs looked at by the run-time loop, by outcome: moved (new copy placed, old one told to stop), completed (the new copy released once the old one stopped), scaled-out (a task added to a scale-out job), or the reason nothing was done (no-gain, no-budget, no-room: the cell had tasks waiting or too few free RUs for a scale-out job to grow, max-moves, no-better-ru, conflict, changed), since the process started',
      labelNames: ['outcome'],
      registers: [this.registry],
      collect() {
        this.reset();
        const m = manager.moveStats;
        this.inc({ outcome: 'moved' }, m.moved);
        this.inc({ outcome: 'completed' }, m.completed);
        this.inc({ outcome: 'scaled-out' }, m.scaledOut);
        for (const [outcome, n] of Object.entries(m.declined)) this.inc({ outcome }, n);
      },
    });
    new Gauge({
      name: 'tarcil_queue_length',
      help: 'Jobs of this process waiting in admission or for capacity',
      registers: [this.registry],
      collect() {
        let n = 0;
        for (const a of manager.agents) n += [...a.inflight.values()].filter((r) => r.queuedMs > 0 || r.readmissions > 0).length;
        this.set(n);
      },
    });
    new Gauge({
      name: 'tarcil_jobs',
      help: 'Jobs owned by this front-end, by state (sum over the front-ends for the cell; finished jobs are counted by tarcil_jobs_finished_total)',
      labelNames: ['state'],
      registers: [this.registry],
      collect() {
        this.reset();
        for (const [state, n] of Object.entries(manager.jobsByState())) this.set({ state }, n);
      },
    });
    new Gauge({
      name: 'tarcil_rus',
      help: 'Resource units of the cell as this front-end sees them, by platform and state (free, busy, down, unschedulable: free on a server blocked by its load monitor, cordoned or draining)',
      labelNames: ['platform', 'state'],
      registers: [this.registry],
      collect() {
        this.reset();
        for (const [platform, byState] of ruCounts(manager)) for (const state of RU_STATES) this.set({ platform, state }, byState[state]);
      },
    });
    new Gauge({
      name: 'tarcil_namespace_rus',
      help: 'RUs the jobs of each namespace occupy (busy, reserved, or claimed by a placement in flight) as this front-end sees the cell: what fair share counts as held',
      labelNames: ['namespace'],
      registers: [this.registry],
      collect() {
        this.reset();
        for (const [namespace, n] of manager.view.state.namespacesHolding()) this.set({ namespace }, n);
      },
    });
    new Gauge({
      name: 'tarcil_servers',
      help: 'Servers of the cell as this front-end sees them, by platform and state (up, down, blocked by the load monitor, cordoned: cordoned or draining)',
      labelNames: ['platform', 'state'],
      registers: [this.registry],
      collect() {
        this.reset();
        for (const s of manager.view.state.servers.values()) {
          const state = s.down ? 'down' : s.cordoned ? 'cordoned' : s.blocked ? 'blocked' : 'up';
          this.inc({ platform: s.spec.platform, state });
        }
      },
    });
  }

  observeDecision(submittedAt: number, rec: DecisionRecord): void {
    const agent = { agent: rec.agent };
    this.decisions.inc(agent);
    this.conflicts.inc(agent, rec.conflicts);
    for (const s of rec.samples) this.sampleSize.observe(agent, s.R);
    this.admissionWait.observe(agent, rec.queuedMs / 1000);
    if (rec.finishedAt !== undefined) this.latency.observe(agent, Math.max(0, rec.finishedAt - Math.max(submittedAt, rec.startedAt)) / 1000);
  }

  /** Every placement an agent committed (all of them, also those a decision record leaves out). */
  observePlacements(agent: string, placements: readonly Placement[]): void {
    const byPlatform = new Map<string, number>();
    for (const p of placements) {
      const platform = this.manager?.view.state.server(p.ru.server)?.spec.platform ?? 'unknown';
      byPlatform.set(platform, (byPlatform.get(platform) ?? 0) + 1);
    }
    for (const [platform, n] of byPlatform) this.placements.inc({ agent, platform }, n);
  }

  observeFinished(state: JobState): void {
    this.finished.inc({ outcome: state });
  }

  /** Ready: the store answers, and the agents schedule (their view of the cell is loaded). */
  protected async notReady(): Promise<string[]> {
    const why = this.store ? await storeReachable(this.store) : [];
    if (this.manager && !this.manager.started) why.push('agents not scheduling yet: the view of the cell is loading');
    return why;
  }
}

function ruCounts(manager: JobManager): Map<string, Record<(typeof RU_STATES)[number], number>> {
  const out = new Map<string, Record<(typeof RU_STATES)[number], number>>();
  for (const s of manager.view.state.servers.values()) {
    let c = out.get(s.spec.platform);
    if (!c) out.set(s.spec.platform, (c = { free: 0, busy: 0, down: 0, unschedulable: 0 }));
    for (let i = 0; i < s.ruCount; i++) {
      if (s.down || s.ruDown[i]) c.down++;
      else if (s.occupants[i]) c.busy++;
      else if (s.blocked || s.cordoned) c.unschedulable++;
      else c.free++;
    }
  }
  return out;
}

/**
 * The node metrics of local monitors, read from them when scraped: their RUs, what runs on them,
 * whether they take placements, and their task outcomes since they started, labelled by server
 * and platform. A `tarcil monitor` registers its one monitor; `tarcil up` registers every monitor
 * of the process in the front-end's registry.
 */
export function registerMonitorMetrics(registry: Registry, monitors: () => Iterable<LocalMonitor>): void {
  const gauge = (name: string, help: string, read: (s: MonitorSnapshot) => number): void => {
    new Gauge({
      name,
      help,
      labelNames: ['server', 'platform'],
      registers: [registry],
      collect() {
        this.reset();
        for (const m of monitors()) {
          const s = m.snapshot();
          this.set({ server: s.server, platform: s.platform }, read(s));
        }
      },
    });
  };
  gauge('tarcil_monitor_rus', 'Resource units of this node', (s) => s.rus);
  gauge('tarcil_monitor_busy_rus', 'RUs holding a task (busy or reserved)', (s) => s.busy);
  gauge('tarcil_monitor_running_tasks', 'Tasks running on this node', (s) => s.running.length);
  gauge('tarcil_monitor_blocked', '1 while a slow task keeps new placements away (paper §5.2)', (s) => (s.blocked ? 1 : 0));
  gauge('tarcil_monitor_min_task_rate', 'Lowest achieved/expected rate among running tasks (1 with none)', (s) => s.running.reduce((m, r) => Math.min(m, r.rate), 1));
  gauge('tarcil_monitor_connected', '1 while the node is registered and its lease confirmed (0: it starts nothing new)', (s) => (s.connected ? 1 : 0));
  gauge('tarcil_monitor_journalled_outcomes', 'Task outcomes in the local journal that the store does not have yet', (s) => s.journalled);
  new Counter({
    name: 'tarcil_monitor_task_events_total',
    help: 'Task starts, ends (completed, failed; killed by this monitor; recorded lost by it), tasks kept under a new lease (adopted), and times the lease went unconfirmed (fenced), since the monitor started',
    labelNames: ['server', 'platform', 'event'],
    registers: [registry],
    collect() {
      this.reset();
      for (const m of monitors()) {
        const s = m.snapshot();
        for (const event of MONITOR_EVENTS) this.inc({ server: s.server, platform: s.platform, event }, s.stats[event]);
      }
    },
  });
  new Counter({
    name: 'tarcil_monitor_registrations_total',
    help: 'Registrations of the node under a lease (the first, and one after each lease the store let expire)',
    labelNames: ['server', 'platform'],
    registers: [registry],
    collect() {
      this.reset();
      for (const m of monitors()) {
        const s = m.snapshot();
        this.inc({ server: s.server, platform: s.platform }, s.stats.registrations);
      }
    },
  });
}

/** Prometheus metrics of a node's local monitor (`tarcil monitor`); ready while the store answers and the node is registered under a confirmed lease. */
export class MonitorMetrics extends MetricsEndpoint {
  private readonly monitor: LocalMonitor;
  private readonly store: ClusterStore | undefined;

  constructor(monitor: LocalMonitor, store?: ClusterStore, keys?: Keys) {
    super();
    this.monitor = monitor;
    this.store = store;
    registerMonitorMetrics(this.registry, () => [monitor]);
    registerStoreTimes(this.registry, store);
    registerWatchEvents(this.registry, store, keys);
  }

  protected async notReady(): Promise<string[]> {
    const why = this.store ? await storeReachable(this.store) : [];
    if (!this.monitor.snapshot().connected) why.push(`node ${this.monitor.server.id} not registered under a confirmed lease: it starts no task`);
    return why;
  }
}

/**
 * Prometheus metrics of a hollow process (`tarcil hollow`), summed over its nodes when scraped:
 * nodes live and dropped, RUs, busy RUs, running tasks, blocked nodes, task events, and the
 * process's own memory and CPU (what a 10,000-node cell costs on one machine).
 */
export class HollowMetrics extends MetricsEndpoint {
  private readonly hollow: HollowNodes;
  private readonly store: ClusterStore | undefined;

  constructor(hollow: HollowNodes, store?: ClusterStore, keys?: Keys) {
    super();
    this.hollow = hollow;
    this.store = store;
    registerStoreTimes(this.registry, store);
    registerWatchEvents(this.registry, store, keys);
    // A snapshot walks every node (10,000 of them, 160,000 RUs): one per scrape, shared by every
    // metric of it, rather than one per metric (a scrape a second took a third of the process's CPU).
    let cached: { at: number; snap: HollowSnapshot } | undefined;
    const snapshot = (): HollowSnapshot => {
      const now = performance.now();
      if (!cached || now - cached.at > 250) cached = { at: now, snap: hollow.snapshot() };
      return cached.snap;
    };
    const gauge = (name: string, help: string, read: (s: HollowSnapshot) => number): void => readGauge(this.registry, name, help, () => read(snapshot()));
    gauge('tarcil_hollow_nodes', 'Hollow nodes alive in this process', (s) => s.live);
    gauge('tarcil_hollow_nodes_dropped', 'Hollow nodes dropped (simulated deaths)', (s) => s.dead);
    gauge('tarcil_hollow_rus', 'Resource units of the live nodes', (s) => s.rus);
    gauge('tarcil_hollow_busy_rus', 'RUs holding a task (busy or reserved)', (s) => s.busy);
    gauge('tarcil_hollow_running_tasks', 'Tasks running on the live nodes', (s) => s.running);
    gauge('tarcil_hollow_blocked_nodes', 'Nodes keeping new placements away (a slow task, paper §5.2)', (s) => s.blocked);
    gauge('tarcil_hollow_connected', '1 while the nodes are registered and the lease confirmed', (s) => (s.connected ? 1 : 0));
    gauge('tarcil_hollow_start_writes_in_flight', "Task-start writes in flight (a node records its task running before it starts it)", (s) => s.startWrites.inFlight);
    gauge('tarcil_hollow_start_writes_waiting', 'Task-start writes waiting for a slot: tasks placed here that have not started yet', (s) => s.startWrites.waiting);
    gauge('tarcil_hollow_start_write_oldest_wait_seconds', 'How long the oldest waiting task-start write has waited (0 when none waits)', (s) => s.startWrites.oldestWaitMs / 1000);
    const counter = (name: string, help: string, read: (s: HollowSnapshot) => number): void => {
      new Counter({
        name,
        help,
        registers: [this.registry],
        collect() {
          this.reset();
          this.inc(read(snapshot()));
        },
      });
    };
    counter('tarcil_hollow_start_writes_total', 'Task-start writes answered by the store', (s) => s.startWrites.done);
    counter('tarcil_hollow_start_write_seconds_total', "Seconds the answered task-start writes took in all, from their node's asking (waiting for a slot included) to the store's answer", (s) => s.startWrites.totalMs / 1000);
    counter('tarcil_hollow_write_requests_total', "Requests that carried the nodes' transactions (task starts, outcomes) to the store", (s) => s.writes.requests);
    counter('tarcil_hollow_write_transactions_total', "The nodes' transactions those requests carried (per request on average: transactions / requests)", (s) => s.writes.transactions);
    gauge('tarcil_hollow_registration_seconds', 'How long the last registration of every node took', (s) => (s.registrationMs ?? 0) / 1000);
    new Counter({
      name: 'tarcil_hollow_task_events_total',
      help: 'Task events summed over every node (as tarcil_monitor_task_events_total)',
      labelNames: ['event'],
      registers: [this.registry],
      collect() {
        this.reset();
        const stats = snapshot().stats;
        for (const event of MONITOR_EVENTS) this.inc({ event }, stats[event]);
      },
    });
  }

  protected async notReady(): Promise<string[]> {
    const why = this.store ? await storeReachable(this.store) : [];
    if (!this.hollow.snapshot().connected) why.push('hollow nodes not registered under a confirmed lease: they start no task');
    return why;
  }
}

/**
 * The HTTP endpoint: `/metrics` (Prometheus text), `/healthz` (200 while the process answers at
 * all: a liveness probe), `/readyz` (200 when `notReady` finds nothing, else 503 with one reason a
 * line: a readiness probe or a load balancer's health check).
 */
function serveRegistry(registry: Registry, host: string, port: number, notReady: ReadinessCheck): Promise<{ server: Server; port: number }> {
  const server = createServer((req, res) => {
    const path = (req.url ?? '').split('?')[0];
    if (path === '/healthz') {
      res.writeHead(200, { 'content-type': 'text/plain' }).end('ok\n');
      return;
    }
    if (path === '/readyz') {
      notReady().then(
        (why) => res.writeHead(why.length === 0 ? 200 : 503, { 'content-type': 'text/plain' }).end(why.length === 0 ? 'ok\n' : `${why.join('\n')}\n`),
        (err: unknown) => res.writeHead(503, { 'content-type': 'text/plain' }).end(`${errorMessage(err)}\n`),
      );
      return;
    }
    if (path !== '/metrics') {
      res.writeHead(404, { 'content-type': 'text/plain' }).end('see /metrics, /healthz, /readyz\n');
      return;
    }
    registry.metrics().then(
      (text) => res.writeHead(200, { 'content-type': registry.contentType }).end(text),
      (err: unknown) => res.writeHead(500).end(errorMessage(err)),
    );
  });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      const a = server.address();
      resolve({ server, port: typeof a === 'object' && a ? a.port : port });
    });
  });
}

function closeServer(s: Server | undefined): Promise<void> {
  if (!s) return Promise.resolve();
  return new Promise((resolve) => s.close(() => resolve()));
}
