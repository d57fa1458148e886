/**
 * Prometheus metrics of one process (`/metrics`). Counters are fed by the job manager's hooks;
 * gauges are read from the agents when scraped, so nothing runs on the scheduling path.
 */
import { createServer, type Server } from 'node:http';
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { DecisionRecord } from '../agent/agent.ts';
import type { JobManager } from '../agent/lifecycle.ts';
import type { HollowNodes, HollowSnapshot } from '../monitor/hollow.ts';
import { MONITOR_EVENTS, type LocalMonitor, type MonitorSnapshot } from '../monitor/monitor.ts';
import { errorMessage } from '../util/errors.ts';

/** A Prometheus registry with its process metrics and the HTTP endpoint that serves it. */
abstract class MetricsEndpoint {
  readonly registry = new Registry();
  private server: Server | undefined;

  /** Serves /metrics on host:port; resolves with the bound port. */
  async listen(host: string, port: number): Promise<number> {
    const { server, port: bound } = await serveRegistry(this.registry, host, port);
    this.server = server;
    return bound;
  }

  close(): Promise<void> {
    const s = this.server;
    this.server = undefined;
    return closeServer(s);
  }
}

export class Metrics extends MetricsEndpoint {
  readonly submitted = new Counter({ name: 'tarcil_jobs_submitted_total', help: 'Jobs acknowledged by this front-end', registers: [this.registry] });
  readonly rejected = new Counter({ name: 'tarcil_jobs_rejected_total', help: 'Job specs rejected as invalid', registers: [this.registry] });
  readonly decisions = new Counter({ name: 'tarcil_decisions_total', help: 'Scheduling decisions completed (one per schedule call)', registers: [this.registry] });
  readonly conflicts = new Counter({ name: 'tarcil_commit_conflicts_total', help: 'Optimistic commits that lost a race', registers: [this.registry] });
  readonly placements = new Counter({ name: 'tarcil_tasks_placed_total', help: 'Tasks placed', registers: [this.registry] });
  readonly sampleSize = new Histogram({
    name: 'tarcil_sample_size',
    help: 'Sample size R per attempt',
    buckets: [2, 4, 8, 16, 32, 64, 128],
    registers: [this.registry],
  });
  readonly admissionWait = new Histogram({
    name: 'tarcil_admission_wait_seconds',
    help: 'Time jobs spent queued by admission control',
    buckets: [0.001, 0.01, 0.1, 0.5, 1, 5, 30, 120],
    registers: [this.registry],
  });
  readonly latency = new Histogram({
    name: 'tarcil_scheduling_latency_seconds',
    help: 'Submission to the last placement of a schedule call',
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1, 5],
    registers: [this.registry],
  });

  constructor(manager?: JobManager) {
    super();
    collectDefaultMetrics({ register: this.registry, prefix: 'tarcil_process_' });
    if (manager) {
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
        'Times this process stopped trusting its owner lease (no keepalive confirmed within the TTL, or lost) and gave up its jobs, since it started',
        () => manager.stats.fencedLeases,
      );
      read('tarcil_jobs_adopted', 'Jobs this process took up from an owner whose lease had expired, since it started', () => manager.stats.adopted);
      read('tarcil_adoptions_queued', 'Orphaned jobs waiting for one of the few adoption slots', () => manager.adoptions.queued);
      new Counter({
        name: 'tarcil_task_moves_total',
        help: 'Slow tasks of migratable and scale-out jobs looked at by the run-time loop, by outcome: moved (new copy placed, old one told to stop), completed (the new copy released once the old one stopped), scaled-out (a task added to a scale-out job), or the reason nothing was done (no-gain, no-budget, max-moves, no-better-ru, conflict, changed), since the process started',
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
    }
  }

  observeDecision(submittedAt: number, rec: DecisionRecord): void {
    this.decisions.inc();
    this.conflicts.inc(rec.conflicts);
    this.placements.inc(rec.placements.length + (rec.omittedPlacements ?? 0));
    for (const s of rec.samples) this.sampleSize.observe(s.R);
    this.admissionWait.observe(rec.queuedMs / 1000);
    if (rec.finishedAt !== undefined) this.latency.observe(Math.max(0, rec.finishedAt - Math.max(submittedAt, rec.startedAt)) / 1000);
  }

}

/**
 * Prometheus metrics of a node's local monitor, read from the monitor when scraped: its RUs,
 * what runs on them, whether it takes placements, and its task outcomes since it started.
 */
export class MonitorMetrics extends MetricsEndpoint {

  constructor(monitor: LocalMonitor) {
    super();
    collectDefaultMetrics({ register: this.registry, prefix: 'tarcil_process_' });
    const labels = { server: monitor.server.id };
    const gauge = (name: string, help: string, read: (s: MonitorSnapshot) => number): void => {
      new Gauge({
        name,
        help,
        labelNames: ['server'],
        registers: [this.registry],
        collect() {
          this.set(labels, read(monitor.snapshot()));
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
      labelNames: ['server', 'event'],
      registers: [this.registry],
      collect() {
        this.reset();
        const stats = monitor.snapshot().stats;
        for (const event of MONITOR_EVENTS) this.inc({ ...labels, event }, stats[event]);
      },
    });
    new Counter({
      name: 'tarcil_monitor_registrations_total',
      help: 'Registrations of the node under a lease (the first, and one after each lease the store let expire)',
      labelNames: ['server'],
      registers: [this.registry],
      collect() {
        this.reset();
        this.inc(labels, monitor.snapshot().stats.registrations);
      },
    });
  }

}

/**
 * Prometheus metrics of a hollow process (`tarcil hollow`), summed over its nodes when scraped:
 * nodes live and dropped, RUs, busy RUs, running tasks, blocked nodes, task events, and the
 * process's own memory and CPU (what a 10,000-node cell costs on one machine).
 */
export class HollowMetrics extends MetricsEndpoint {
  constructor(hollow: HollowNodes) {
    super();
    collectDefaultMetrics({ register: this.registry, prefix: 'tarcil_process_' });
    // A snapshot walks every node (10,000 of them, 160,000 RUs): one per scrape, shared by every
    // metric of it, rather than one per metric (a scrape a second took a third of the process's CPU).
    let cached: { at: number; snap: HollowSnapshot } | undefined;
    const snapshot = (): HollowSnapshot => {
      const now = performance.now();
      if (!cached || now - cached.at > 250) cached = { at: now, snap: hollow.snapshot() };
      return cached.snap;
    };
    const gauge = (name: string, help: string, read: (s: HollowSnapshot) => number): void => {
      new Gauge({
        name,
        help,
        registers: [this.registry],
        collect() {
          this.set(read(snapshot()));
        },
      });
    };
    gauge('tarcil_hollow_nodes', 'Hollow nodes alive in this process', (s) => s.live);
    gauge('tarcil_hollow_nodes_dropped', 'Hollow nodes dropped (simulated deaths)', (s) => s.dead);
    gauge('tarcil_hollow_rus', 'Resource units of the live nodes', (s) => s.rus);
    gauge('tarcil_hollow_busy_rus', 'RUs holding a task (busy or reserved)', (s) => s.busy);
    gauge('tarcil_hollow_running_tasks', 'Tasks running on the live nodes', (s) => s.running);
    gauge('tarcil_hollow_blocked_nodes', 'Nodes keeping new placements away (a slow task, paper §5.2)', (s) => s.blocked);
    gauge('tarcil_hollow_connected', '1 while the nodes are registered and the lease confirmed', (s) => (s.connected ? 1 : 0));
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
}

function serveRegistry(registry: Registry, host: string, port: number): Promise<{ server: Server; port: number }> {
  const server = createServer((req, res) => {
    if (req.url !== '/metrics') {
      res.writeHead(404).end('see /metrics\n');
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
