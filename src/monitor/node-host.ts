/**
 * What a node (node.ts) needs from the process that runs it: a monitor runs one node, a hollow
 * process thousands under one lease.
 */
import type { JobSpec } from '../model/types.ts';
import type { Keys } from '../state/keys.ts';
import type { HeldLease } from '../state/lease.ts';
import type { ClusterStore } from '../store/types.ts';
import type { SharedBackoff } from '../util/backoff.ts';
import type { Clock } from '../util/clock.ts';
import type { Logger } from '../util/log.ts';
import type { Executor } from './executor.ts';
import type { SlowdownModel } from './load.ts';

/** What a node needs from the process that runs it: the store, the lease, shared caches. */
export interface NodeHost<Node = unknown> {
  store: ClusterStore;
  keys: Keys;
  clock: Clock;
  log: Logger;
  executor: Executor;
  loadThreshold: number;
  /** Blocks of slow servers (NodeLoadHost.block; unset: DEFAULT_RUNTIME.block). */
  block?: boolean;
  slowdown: SlowdownModel | undefined;
  disconnectGraceMs: number;
  /** The lease writes go under now (a new one as soon as it is granted). */
  lease(): HeldLease | undefined;
  /** The lease to write under, if the store may still hold it. */
  usableLeaseId(): string | undefined;
  /** Registered under a confirmed lease and not closing: tasks may start. */
  connected(): boolean;
  /** Registered (outcomes are written by the reporter only then; else by the registration). */
  registered(): boolean;
  /** The job's spec (cached), for tasks whose RU record carries no duration or command. */
  jobSpec(job: string): Promise<JobSpec | undefined>;
  /** The node's server record changed (blocked, draining): put it again. */
  serverChanged(node: Node): void;
  track(p: Promise<unknown>): void;
  /**
   * Runs a task-start write (a hollow process bounds how many of its nodes' writes are in flight,
   * so a burst of placements does not become tens of thousands of concurrent etcd requests).
   */
  gate?<T>(write: () => Promise<T>): Promise<T>;
  /** The pause of task starts retried after the store failed them, shared by the host's nodes. */
  launchBackoff: SharedBackoff;
}
