/**
 * The node metrics: a local monitor's (`tarcil monitor`, or every monitor of `tarcil up` in the
 * front-end's registry) and a hollow process's (`tarcil hollow`), read from them when scraped.
 */
import { Counter, Gauge, type Registry } from 'prom-client';
import type { HollowNodes, HollowSnapshot } from '../monitor/hollow.ts';
import { MONITOR_EVENTS, type LocalMonitor, type MonitorSnapshot } from '../monitor/monitor.ts';
import type { Keys } from '../state/keys.ts';
import type { ClusterStore } from '../store/types.ts';
import { MetricsEndpoint, readGauge, registerStoreRequests, registerStoreTimes, registerWatchEvents, storeReachable } from '../rpc/metrics-endpoint.ts';

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
  gauge('tarcil_monitor_min_task_rate', 'Lowest achieved/expected rate among running tasks (1 with none)', (s) =>
    s.running.reduce((m, r) => Math.min(m, r.rate), 1),
  );
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
    registerStoreRequests(this.registry, store, keys);
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
    registerStoreRequests(this.registry, store, keys);
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
    gauge(
      'tarcil_hollow_start_writes_in_flight',
      'Task-start writes in flight (a node records its task running before it starts it)',
      (s) => s.startWrites.inFlight,
    );
    gauge(
      'tarcil_hollow_start_writes_waiting',
      'Task-start writes waiting for a slot: tasks placed here that have not started yet',
      (s) => s.startWrites.waiting,
    );
    gauge(
      'tarcil_hollow_start_write_oldest_wait_seconds',
      'How long the oldest waiting task-start write has waited (0 when none waits)',
      (s) => s.startWrites.oldestWaitMs / 1000,
    );
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
    counter(
      'tarcil_hollow_start_write_seconds_total',
      "Seconds the answered task-start writes took in all, from their node's asking (waiting for a slot included) to the store's answer",
      (s) => s.startWrites.totalMs / 1000,
    );
    counter(
      'tarcil_hollow_write_requests_total',
      "Requests that carried the nodes' transactions (task starts, outcomes) to the store",
      (s) => s.writes.requests,
    );
    counter(
      'tarcil_hollow_write_transactions_total',
      "The nodes' transactions those requests carried (per request on average: transactions / requests)",
      (s) => s.writes.transactions,
    );
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
