/**
 * The store's key layout under a cluster's prefix: servers, RUs, epochs, jobs, tasks, queue,
 * owners, decisions, requests. Every component builds its keys here.
 */
import type { RuRef } from '../model/types.ts';

/**
 * Key layout under a configurable prefix, so several clusters can share one etcd.
 *
 *   <p>servers/<id>            server record (lease-bound to its monitor when one runs)
 *   <p>rus/<server>/<idx>      RU record: free, or occupant with its caused vector and priority
 *   <p>epochs/<server>         rewritten by every placement on the server under the `server`
 *                              conflict scope (and by registrations, gang reservations, cancels
 *                              and moves), which compares its mod revision
 *   <p>jobs/<id>               job spec and state
 *   <p>tasks/<job>/<idx>       task record (absent while a first placement's chunk record,
 *                              below, says where the task runs)
 *   <p>tasks/<job>/<idx>p      the tasks one placement transaction started, from task <idx> on
 *                              within its block of 10,000 (state/task-chunks.ts)
 *   <p>tasks/<job>/<idx>d      tasks that succeeded or were cancelled, as their owner recorded
 *                              them in one write, from task <idx> on (state/task-outcomes.ts)
 *   <p>queue/<prio>/<seq>/<id> durable admission queue, ordered by priority then arrival
 *   <p>owners/<job>            the job's owner: the lease of its front-end (in the value, not
 *                              bound to it, so the record outlives the lease it names)
 *   <p>members/<lease>         one per front-end, bound to its owner lease: alive while the lease
 *                              is; every owner write compares it (the fence)
 *   <p>cancels/<job>           a cancellation asked by any front-end, for the job's owner
 *   <p>layout                  the version of this layout the cell was written with
 *   <p>decisions/<job>         what the agent decided and why (for `explain`)
 *   <p>finished/<time>-<job>   one per finished job, written with its final record: what
 *                              retention reads, oldest first, instead of following `jobs/`
 *   <p>cordons/<server>        a node cordoned or draining (`tarcil node`): no lease, so it
 *                              outlives the monitor's registrations; deleted by uncordon
 *   <p>namespaces/<ns>         a namespace: weight and quota (`default` needs no record)
 *   <p>usage/<ns>              RUs a namespace with an RU quota holds: compared and updated by
 *                              every placement transaction of its jobs (tenancy/quota.ts)
 *   <p>submits/<ns>            submissions to a namespace with a limit on its jobs: bumped by
 *                              each, so that racing submissions cannot pass the limit together
 *   <p>acl/tokens/<accessor>   an access token: its policy and the hash of its secret
 *   <p>acl/bootstrapped        written once by `tarcil acl bootstrap`
 *   <p>audit/<time>-<id>       one call that changed something: who, what, when, the result
 *
 * A job of a namespace other than `default` has the id `<ns>/<name>` (tenancy/namespace.ts), so
 * its jobs/, tasks/, queue/, owners/ and decisions/ keys are under the namespace.
 */
/** The key prefix when none is given (`--prefix`): one tarcil cluster per prefix in one etcd. */
export const DEFAULT_PREFIX = '/tarcil/default/';

export class Keys {
  readonly prefix: string;

  constructor(prefix = DEFAULT_PREFIX) {
    this.prefix = prefix.endsWith('/') ? prefix : `${prefix}/`;
  }

  servers(): string {
    return `${this.prefix}servers/`;
  }
  server(id: string): string {
    return `${this.prefix}servers/${id}`;
  }
  rus(): string {
    return `${this.prefix}rus/`;
  }
  serverRus(server: string): string {
    return `${this.prefix}rus/${server}/`;
  }
  ru(ref: RuRef): string {
    return `${this.prefix}rus/${ref.server}/${pad(ref.index, 3)}`;
  }
  cordons(): string {
    return `${this.prefix}cordons/`;
  }
  cordon(server: string): string {
    return `${this.prefix}cordons/${server}`;
  }
  epochs(): string {
    return `${this.prefix}epochs/`;
  }
  epoch(server: string): string {
    return `${this.prefix}epochs/${server}`;
  }
  jobs(): string {
    return `${this.prefix}jobs/`;
  }
  job(id: string): string {
    return `${this.prefix}jobs/${id}`;
  }
  tasks(job: string): string {
    return `${this.prefix}tasks/${job}/`;
  }
  allTasks(): string {
    return `${this.prefix}tasks/`;
  }
  task(job: string, index: number): string {
    return `${this.prefix}tasks/${job}/${pad(index, 6)}`;
  }
  /** The chunk record of the tasks a placement started from task `first` on (state/task-chunks.ts). */
  taskChunk(job: string, first: number): string {
    return `${this.prefix}tasks/${job}/${pad(first, 6)}p`;
  }
  /** The record of tasks that ended, written by their owner in one write from task `first` on (state/task-outcomes.ts). */
  taskDone(job: string, first: number): string {
    return `${this.prefix}tasks/${job}/${pad(first, 6)}d`;
  }
  queue(): string {
    return `${this.prefix}queue/`;
  }
  /** Every queue entry of one job: its final write deletes them by this prefix, without reading the queue. */
  jobQueue(job: string): string {
    return `${this.prefix}queue/${job}/`;
  }
  /** One entry of a job's: `queue/<job>/<since>-<name>`, a job's entries in the order they were written. */
  queueEntry(job: string, since: number, name: string): string {
    return `${this.prefix}queue/${job}/${pad(since, 16)}-${name}`;
  }
  owners(): string {
    return `${this.prefix}owners/`;
  }
  owner(job: string): string {
    return `${this.prefix}owners/${job}`;
  }
  /** `members/<lease>`: a front-end's presence, bound to its owner lease (owner/members.ts). */
  members(): string {
    return `${this.prefix}members/`;
  }
  member(lease: string): string {
    return `${this.prefix}members/${lease}`;
  }
  /** `cancels/<job>`: the mark a cancellation leaves for the job's owner, which follows `cancels/`. */
  cancels(): string {
    return `${this.prefix}cancels/`;
  }
  cancel(job: string): string {
    return `${this.prefix}cancels/${job}`;
  }
  /** The layout's version (owner/layout.ts). */
  layout(): string {
    return `${this.prefix}layout`;
  }
  /** `profiles/<name>` → the learned estimate of a workload class (state/profiles.ts). */
  profiles(): string {
    return `${this.prefix}profiles/`;
  }
  profile(name: string): string {
    return `${this.prefix}profiles/${encodeURIComponent(name)}`;
  }
  /** `finished/`: the finished jobs in the order they finished (state/retention.ts). */
  finished(): string {
    return `${this.prefix}finished/`;
  }
  finishedEntry(at: number, job: string): string {
    return `${this.prefix}finished/${pad(at, 16)}-${job}`;
  }
  decision(job: string): string {
    return `${this.prefix}decisions/${job}`;
  }
  namespaces(): string {
    return `${this.prefix}namespaces/`;
  }
  namespace(ns: string): string {
    return `${this.prefix}namespaces/${ns}`;
  }
  /** The jobs of one namespace other than default (default's are the bare ids under jobs/). */
  namespaceJobs(ns: string): string {
    return `${this.prefix}jobs/${ns}/`;
  }
  usages(): string {
    return `${this.prefix}usage/`;
  }
  usage(ns: string): string {
    return `${this.prefix}usage/${ns}`;
  }
  submits(ns: string): string {
    return `${this.prefix}submits/${ns}`;
  }
  tokens(): string {
    return `${this.prefix}acl/tokens/`;
  }
  token(accessor: string): string {
    return `${this.prefix}acl/tokens/${accessor}`;
  }
  aclBootstrapped(): string {
    return `${this.prefix}acl/bootstrapped`;
  }
  audits(): string {
    return `${this.prefix}audit/`;
  }
  audit(at: number, id: string): string {
    return `${this.prefix}audit/${pad(at, 16)}-${id}`;
  }

  /** Parses `rus/<server>/<idx>`; undefined for any other key. */
  parseRu(key: string): RuRef | undefined {
    const base = this.rus();
    if (!key.startsWith(base)) return undefined;
    const rest = key.slice(base.length);
    const slash = rest.lastIndexOf('/');
    if (slash <= 0) return undefined;
    const index = Number(rest.slice(slash + 1));
    if (!Number.isInteger(index)) return undefined;
    return { server: rest.slice(0, slash), index };
  }
  /** The id after a collection prefix (`servers/`, `epochs/`, `jobs/`, ...). */
  tail(collection: string, key: string): string | undefined {
    return key.startsWith(collection) ? key.slice(collection.length) : undefined;
  }
}

function pad(n: number, width: number): string {
  return String(n).padStart(width, '0');
}
