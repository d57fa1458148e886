/**
 * Prometheus metrics of a front-end (`/metrics`; the endpoint and its health checks are
 * rpc/metrics-endpoint.ts, the node metrics node/metrics.ts).
 * Counters are fed by the job manager's hooks; gauges are read from the agents' shared view, the
 * owned jobs and the monitors when scraped, so nothing runs on the scheduling path. Process and
 * Node.js metrics carry their standard names (`process_cpu_seconds_total`,
 * `nodejs_eventloop_lag_p99_seconds`, …), as prom-client's collectDefaultMetrics names them.
 */
import { Counter, Gauge, Histogram } from 'prom-client';
import type { DecisionRecord } from '../agent/agent.ts';
import type { JobManager } from '../owner/manager.ts';
import { CONFLICT_CAUSES, FRONT_END_RACES } from '../agent/conflict-cause.ts';
import { HANDOFF_OUTCOMES } from '../agent/handoff.ts';
import type { JobState } from '../model/types.ts';
import type { Placement } from '../state/decisions.ts';
import type { Housekeeper } from '../state/housekeeping.ts';
import type { LocalMonitor } from '../monitor/monitor.ts';
import type { Keys } from '../state/keys.ts';
import type { ClusterStore } from '../store/types.ts';
import { MetricsEndpoint, readGauge, registerStoreRequests, registerStoreTimes, registerWatchEvents, storeReachable } from '../rpc/metrics-endpoint.ts';
import { registerMonitorMetrics } from '../node/metrics.ts';

/**
 * Buckets of the latency and wait histograms, in seconds: a millisecond to 30 minutes. A job may
 * wait minutes for capacity or admission; a top bucket of seconds would put all of it in +Inf.
 */
export const DURATION_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800];

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

export class Metrics extends MetricsEndpoint {
  readonly submitted = new Counter({ name: 'tarcil_jobs_submitted_total', help: 'Jobs acknowledged by this front-end', registers: [this.registry] });
  readonly rejected = new Counter({ name: 'tarcil_jobs_rejected_total', help: 'Job specs rejected as invalid', registers: [this.registry] });
  readonly finished = new Counter({
    name: 'tarcil_jobs_finished_total',
    help: 'Jobs owned by this front-end that ended, by outcome (succeeded, failed, cancelled)',
    labelNames: ['outcome'],
    registers: [this.registry],
  });
  readonly decisions = new Counter({
    name: 'tarcil_decisions_total',
    help: 'Scheduling decisions completed (one per schedule call), by agent',
    labelNames: ['agent'],
    registers: [this.registry],
  });
  readonly conflicts = new Counter({
    name: 'tarcil_commit_conflicts_total',
    help: 'Optimistic commits that lost a race, by agent',
    labelNames: ['agent'],
    registers: [this.registry],
  });
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
    registerStoreRequests(this.registry, o?.store, o?.keys);
    if (o?.monitors) registerMonitorMetrics(this.registry, o.monitors);
    const hk = o?.housekeeper;
    if (hk) {
      const gauge = (name: string, help: string, read: (h: HousekeeperView) => number): void =>
        readGauge(this.registry, name, help, () => {
          const h = hk();
          return h ? read(h) : 0;
        });
      gauge('tarcil_housekeeper_leading', '1 while this front-end is the elected housekeeper (it runs retention and compaction), else 0', (h) =>
        h.leading ? 1 : 0,
      );
      gauge('tarcil_housekeeper_elections', 'Times this front-end was elected housekeeper', (h) => h.stats.elected);
      gauge(
        'tarcil_housekeeper_stuck_waits',
        'Times this front-end found its wait in the housekeeper election stuck (not elected though nobody else led) and stood again',
        (h) => h.stats.stuck,
      );
      gauge(
        'tarcil_housekeeper_compacted_revision',
        "The store revision this front-end last compacted etcd's history to (0: none)",
        (h) => h.stats.compactedTo,
      );
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
    read('tarcil_scheduling', '1 once this front-end places tasks (its view of the cell is loaded), 0 while it only takes submissions', () =>
      manager.started ? 1 : 0,
    );
    read(
      'tarcil_owner_leases_fenced',
      "Times the store said this process's owner lease was gone (expired or revoked), so that it gave up its jobs, since it started",
      () => manager.stats.fencedLeases,
    );
    read(
      'tarcil_owner_lease_pauses',
      'Times this process paused its jobs because no keepalive of its owner lease was confirmed within the TTL (it resumes them if the store still holds the lease), since it started',
      () => manager.stats.leasePauses,
    );
    read(
      'tarcil_commits',
      "Placement transactions this process's agents sent, those that conflicted included (tarcil_commit_conflicts_total), since it started",
      () => manager.agents.reduce((n, a) => n + a.stats.commits, 0),
    );
    read(
      'tarcil_samples',
      "Sampling rounds of this process's agents (one per decision of a chunk, retries included), since it started: against tarcil_tasks_placed_total, the decisions a placement costs",
      () => manager.agents.reduce((n, a) => n + a.stats.samples, 0),
    );
    read('tarcil_candidates_scored', "RUs this process's agents sampled and scored, since it started", () =>
      manager.agents.reduce((n, a) => n + a.stats.candidates, 0),
    );
    read(
      'tarcil_reserve_holds',
      "Times this process's agents held a job of a long workload class back because the free RUs were at or below the short-task reserve (shortReserve), since it started",
      () => manager.agents.reduce((n, a) => n + a.stats.reserveHolds, 0),
    );
    /** A counter of the agents' counts by one label, read at each scrape. */
    const byLabel = <K extends string>(
      name: string,
      help: string,
      label: string,
      values: readonly K[],
      count: (a: JobManager['agents'][number], v: K) => number,
    ): void => {
      new Counter({
        name,
        help,
        labelNames: [label],
        registers: [this.registry],
        collect() {
          this.reset();
          for (const v of values)
            this.inc(
              { [label]: v },
              manager.agents.reduce((n, a) => n + count(a, v), 0),
            );
        },
      });
    };
    byLabel(
      'tarcil_commit_conflicts_by_cause_total',
      "Placement commits of this process's agents that conflicted, by cause: front-end (another front-end's agent took a pick), sibling (another agent of this process did), stale (a pick changed otherwise: placed and freed since the view saw it, or its server's epoch moved), other (no pick changed: the fence, a quota, a task record or a move's source did), since it started",
      'cause',
      CONFLICT_CAUSES,
      (a, c) => a.stats.conflictCauses[c],
    );
    byLabel(
      'tarcil_commit_conflicts_front_end_total',
      "Of the front-end conflicts, by race: turn (the pick's server changed home between the rival's placement and this commit), split (the same home, this front-end's sampling split among the homes), unsplit (the same home, not split), since it started",
      'race',
      FRONT_END_RACES,
      (a, r) => a.stats.frontEndRaces[r],
    );
    read(
      'tarcil_commit_conflicts_front_end_lag_ms',
      "Sum over the front-end conflicts of how long before this commit was built the rival's was (ms), since it started: over tarcil_commit_conflicts_front_end_total, the mean lag of this view",
      () => manager.agents.reduce((n, a) => n + a.stats.frontEndLagMs, 0),
    );
    read(
      'tarcil_task_outcomes_compacted',
      "Tasks whose outcome was compacted out of the store's history before their owner recorded it, recorded failed (saying so; never run again), since it started",
      () => manager.stats.outcomesCompacted,
    );
    read(
      'tarcil_task_outcomes_carried',
      "Task outcomes not yet recorded when their RU was placed again, found in the next placement's RU record (which carries the freed RU's outcome on) rather than in the store's history, since it started",
      () => manager.stats.outcomesCarried,
    );
    read(
      'tarcil_tasks_swept',
      "Placed or running tasks whose RU the view showed moved on without their owner having seen it happen, read again by the owner's periodic check, since it started",
      () => manager.stats.sweptTasks,
    );
    read(
      'tarcil_recent_ends',
      'Task ends (freed RUs) this front-end keeps (two minutes, at most 200,000) for an adoption of their job to take up',
      () => manager.recentEnds.size,
    );
    read('tarcil_recent_ends_bytes', 'The length of the freed-RU values those ends are kept as, summed', () => manager.recentEnds.keptChars);
    read(
      'tarcil_task_outcomes_from_recent_ends',
      'Task ends an adoption took from the ends this front-end kept (not read from the store history), since it started',
      () => manager.stats.outcomesFromRecentEnds,
    );
    read('tarcil_jobs_adopted', 'Jobs this process took up from an owner whose lease had expired, since it started', () => manager.stats.adopted);
    read(
      'tarcil_launch_calls',
      "LaunchTask calls sent to nodes' monitors for tasks they had not recorded running --launch-after after the commit (every placement with 0), since it started",
      () => manager.stats.launches,
    );
    read('tarcil_adoptions_queued', 'Orphaned jobs waiting for one of the few adoption slots', () => manager.adoptions.queued);
    new Counter({
      name: 'tarcil_freed_handoffs_total',
      help: 'Freed RUs whose server has another front-end as its home (several front-ends with tasks to place; --agent handoffMs): held back for the window (handed-off), then woken for here because still free (woken-after-window), taken meanwhile (taken-meanwhile) or still free but left to its home while free RUs are scarce (left-to-home); and free RUs woken for here because their server moved to this front-end as its home while free RUs are scarce (came-home; --agent partitionBelow), since the process started',
      labelNames: ['outcome'],
      registers: [this.registry],
      collect() {
        this.reset();
        const h = manager.view.handoff.stats;
        for (const [outcome, stat] of Object.entries(HANDOFF_OUTCOMES)) this.inc({ outcome }, h[stat]);
      },
    });
    read('tarcil_handoff_front_ends', 'Front-ends with tasks to place, this one included, as this one sees them (each server has its home among them)', () =>
      manager.view.handoff.memberCount(),
    );
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
