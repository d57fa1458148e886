/**
 * What the scheduling agents of one process share: one list+watch of servers, RUs (and epochs) into
 * one cluster view, the admission counters kept in step with it, the in-flight claims of every
 * agent's commits (held in the view, see RuIndex.claim), and the scheduling calls waiting for
 * a freed RU. Memory and watch work are then those of one agent whatever the number of agents;
 * each agent keeps its own Rng, commits and decision records. A standalone agent makes its own.
 */
import { AdmissionCounters } from '../admission/index.ts';
import { RuIndex } from '../sampling/ru-index.ts';
import type { Keys } from '../state/keys.ts';
import type { ClusterStore } from '../store/types.ts';
import type { Clock } from '../util/clock.ts';
import type { Logger } from '../util/log.ts';
import { AgentCache } from './cache.ts';
import type { AgentConfig } from './config.ts';
import { wireAdmission } from './core.ts';
import { FairShare } from './fair-share.ts';
import { FreedWaiters } from './freed-waiters.ts';
import { RunTimes } from './wait-order.ts';
import { DEFAULT_CORE_CONFIG } from './defaults.ts';
import { reserveHolds, type ReserveConfig } from './short-reserve.ts';
import { FreedHandoff } from './handoff.ts';
import { listNamespaceRecords } from '../tenancy/namespaces.ts';
import { namespaceOfJob } from '../tenancy/namespace.ts';

/** How often the namespaces' weights are read again (at most; only while namespaces wait). */
const WEIGHTS_EVERY_MS = 5000;

export interface SharedViewOptions {
  store: ClusterStore;
  keys: Keys;
  clock: Clock;
  log: Logger;
  /** Admission buckets and history, and whether epochs are followed (the `server` conflict scope). */
  config: Pick<AgentConfig, 'buckets' | 'historyWindowMs' | 'conflictScope'> &
    Partial<Pick<AgentConfig, 'fairShare' | 'handoffMs' | 'partitionBelow' | 'waitOrder' | 'shortReserve' | 'longFactor' | 'bypassAbove'>>;
}

export class SharedView {
  readonly state = new RuIndex();
  readonly admission: AdmissionCounters;
  readonly cache: AgentCache;
  readonly waiters: FreedWaiters;
  /** The run times of the tasks this process's job owner saw end, per workload class (the `ratio` wait order reads them). */
  readonly runTimes = new RunTimes();
  /** Freed RUs among the front-ends of the cell (handoff.ts): its owner sets who this process is. */
  readonly handoff: FreedHandoff;
  /** Fair share among namespaces over this view's RUs (undefined when the option is off). */
  readonly fair: FairShare | undefined;
  private started: Promise<void> | undefined;
  private closed: Promise<void> | undefined;
  private weightsAt = Number.NEGATIVE_INFINITY;
  private weightsReading = false;
  private readonly reserve: ReserveConfig;

  constructor(private readonly o: SharedViewOptions) {
    const state = this.state;
    this.fair =
      o.config.fairShare === false
        ? undefined
        : new FairShare({ held: (ns) => state.namespaceRus(ns), holding: () => state.namespacesHolding().keys(), totalRus: () => state.totalRus });
    this.reserve = {
      shortReserve: o.config.shortReserve ?? DEFAULT_CORE_CONFIG.shortReserve,
      longFactor: o.config.longFactor ?? DEFAULT_CORE_CONFIG.longFactor,
      bypassAbove: o.config.bypassAbove ?? DEFAULT_CORE_CONFIG.bypassAbove,
    };
    this.waiters = new FreedWaiters(this.fair, {
      order: o.config.waitOrder,
      now: () => o.clock.now(),
      expected: (cls) => this.runTimes.expected(cls),
      holds: (w) => this.reserveHolds(w.runClass, w.priority),
    });
    this.admission = new AdmissionCounters({
      buckets: o.config.buckets,
      clock: o.clock,
      historyWindowMs: o.config.historyWindowMs,
      seed: 0x7a3c11,
    });
    wireAdmission(this.state, this.admission);
    // Under the `ru` scope nothing compares server epochs (commits still bump them, for agents
    // using the `server` scope): following them would double the watch traffic for nothing.
    this.cache = new AgentCache({
      store: o.store,
      keys: o.keys,
      state: this.state,
      clock: o.clock,
      log: o.log,
      watchEpochs: o.config.conflictScope === 'server',
    });
    this.handoff = new FreedHandoff({
      state,
      clock: o.clock,
      windowMs: o.config.handoffMs ?? 0,
      partitionBelow: o.config.partitionBelow ?? 0,
      wake: (server, index) => this.waiters.freed(server, index),
      waiting: () => this.waiters.size,
    });
    this.cache.onFreed((server, index) => this.handoff.freed(server, index));
  }

  /** Lists and starts watching (once, however many agents call it). */
  start(): Promise<void> {
    this.started ??= this.cache.start();
    return this.started;
  }

  /**
   * Reads the namespaces' weights again when the last read is older than WEIGHTS_EVERY_MS (in the
   * background: until then the weights known, 1 for a namespace not yet read).
   */
  refreshWeights(): void {
    const fair = this.fair;
    if (!fair || this.weightsReading || this.o.clock.now() - this.weightsAt < WEIGHTS_EVERY_MS) return;
    this.weightsReading = true;
    this.weightsAt = this.o.clock.now();
    listNamespaceRecords(this.o.store, this.o.keys)
      .then((recs) => fair.setWeights(recs))
      .catch((err: unknown) => this.o.log.debug({ err }, 'reading namespace weights failed'))
      .finally(() => {
        this.weightsReading = false;
      });
  }

  /**
   * Fair share (fair-share.ts): should a job of `jobId`, about to take `m` RUs, wait in the
   * waiters' order instead, because namespaces further below their share wait for more than is free?
   */
  mustYield(jobId: string, m: number): boolean {
    const fair = this.fair;
    if (!fair) return false;
    const needs = this.waiters.waitingNeeds;
    if (needs.size === 0) return false;
    this.refreshWeights();
    return fair.mustYield(namespaceOfJob(jobId), m, this.state.available.size, needs);
  }

  /** The short-task reserve (short-reserve.ts): is a job of `runClass` and `priority` held back now? */
  reserveHolds(runClass: string | undefined, priority: number): boolean {
    return reserveHolds(this.reserve, this.runTimes, { available: this.state.available.size, total: this.state.totalRus }, runClass, priority);
  }

  /** Fair share's limit on preemption across namespaces for a job of `jobId` that may preempt. */
  fairDisplace(jobId: string): { mayDisplace?: (victimJob: string) => boolean } {
    return this.fair ? { mayDisplace: this.fair.mayDisplace(namespaceOfJob(jobId), this.waiters.waitingNeeds.keys()) } : {};
  }

  close(): Promise<void> {
    this.handoff.close();
    this.closed ??= this.cache.close();
    return this.closed;
  }
}
