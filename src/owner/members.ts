/**
 * The front-ends of a cell. Each is present through `members/<lease>`, a record bound to its owner
 * lease: written when the lease is granted, deleted by etcd when the lease ends or is revoked.
 * Every front-end follows `members/` (one key per front-end) instead of every job's owner record:
 *
 * - a member that goes is the sign that its jobs are to be adopted: the survivors then read the
 *   owner records (adoption.ts), which name the lease of each job's owner and outlive it;
 * - every write for an owned job compares the writer's own member key (ownerFence): once its lease
 *   is gone so is the key, and no write of the old owner lands after a survivor adopted its jobs
 *   (adoption compares that the old member key is gone);
 * - `placing` says which front-ends own jobs with tasks to place, for the freed-RU handoff.
 *
 * The same follow carries `cancels/`: the mark a cancellation leaves for the job's owner, which
 * follows no job record (submit.ts).
 */
import type { MemberRecord } from '../state/live-records.ts';
import type { Keys } from '../state/keys.ts';
import { parseJson } from '../state/records.ts';
import { Follower } from '../state/follow.ts';
import type { ClusterStore, KeyValue } from '../store/types.ts';
import type { Clock } from '../util/clock.ts';
import { errorMessage } from '../util/errors.ts';
import type { Logger } from '../util/log.ts';
import { MemberDemand } from '../agent/handoff.ts';

/** How long a front-end has had no task to place before its record says so (it says the opposite at once). */
export const IDLE_AFTER_MS = 1000;
/** Leases whose going is remembered (one per front-end life: a few a day). */
const GONE_KEPT = 1000;

export interface MembersOptions {
  store: ClusterStore;
  keys: Keys;
  clock: Clock;
  log: Logger;
  process: string;
  /** The store layout this front-end writes, in its record (owner/layout.ts). */
  layout: number;
  /** Since when it has kept the task ends its view saw (owner/recent-ends.ts), in its record. */
  endsSince?: number;
  /** A member's record went (its lease ended): its jobs are to be adopted. Also after a re-list. */
  onGone(lease: string | undefined): void;
  /** A cancellation's mark for `job` (put, or listed). */
  onCancel(job: string): void;
}

export class Members {
  /** Lease → record of every member this process sees. */
  readonly live = new Map<string, MemberRecord>();
  /** The members with tasks to place (FreedHandoff's demand). */
  readonly demand = new MemberDemand();
  private follower: Follower | undefined;
  private published: { lease: string; placing: boolean } | undefined;
  private idleSince: number | undefined;
  private writing = false;
  private readonly gone = new Map<string, number>();

  constructor(private readonly o: MembersOptions) {}

  start(): Promise<void> {
    const k = this.o.keys;
    this.follower = new Follower({
      store: this.o.store,
      clock: this.o.clock,
      log: this.o.log,
      prefix: [k.members(), k.cancels()],
      onSnapshot: (_kvs, _rev, [members = [], cancels = []]) => {
        this.listedMembers(members);
        for (const kv of cancels) this.onCancelKey(kv);
      },
      // One watch ended (the cancels' start compacted away, after etcd restarted): its prefix alone
      // is listed again; the members' watch resumed where it was, and no adoption scan is needed.
      onRelistPrefix: (index, kvs) => {
        if (index === 0) this.listedMembers(kvs);
        else for (const kv of kvs) this.onCancelKey(kv);
      },
      onEvent: (kv, deleted) => {
        if (kv.key.startsWith(k.members())) this.onMember(kv, deleted);
        else if (!deleted) this.onCancelKey(kv);
      },
    });
    return this.follower.start();
  }

  private listedMembers(members: readonly KeyValue[]): void {
    const before = new Set(this.live.keys());
    this.live.clear();
    this.demand.clear();
    for (const kv of members) this.onMember(kv, false);
    for (const lease of before) if (!this.live.has(lease)) this.o.onGone(lease);
    // Whatever went unseen while the watch was down: the adoption scan looks at every job.
    this.o.onGone(undefined);
  }

  close(): Promise<void> | undefined {
    return this.follower?.close();
  }

  /** Writes this front-end's record, bound to `lease` (once for every lease granted). */
  async join(lease: string, placing: boolean): Promise<void> {
    await this.o.store.put(this.o.keys.member(lease), this.record(placing), { lease });
    this.published = { lease, placing };
    this.idleSince = undefined;
  }

  /**
   * Keeps the record's `placing` in step with this front-end's own jobs: at once when it has tasks
   * to place again, IDLE_AFTER_MS after it has none (a front-end between two jobs stays placing).
   */
  update(placing: boolean): void {
    const p = this.published;
    if (!p || this.writing) return;
    if (placing === p.placing) {
      this.idleSince = undefined;
      return;
    }
    const now = this.o.clock.now();
    if (!placing) {
      this.idleSince ??= now;
      if (now - this.idleSince < IDLE_AFTER_MS) return;
    }
    this.writing = true;
    const key = this.o.keys.member(p.lease);
    this.o.store
      .txn({ compare: [{ key, target: 'lease', op: '==', value: p.lease }], success: [{ type: 'put', key, value: this.record(placing), lease: p.lease }] })
      .then((res) => {
        if (res.succeeded && this.published === p) this.published = { lease: p.lease, placing };
        this.idleSince = undefined;
      })
      .catch((err: unknown) => this.o.log.debug({ err: errorMessage(err) }, 'member record not updated; tried again'))
      .finally(() => {
        this.writing = false;
      });
  }

  private record(placing: boolean): string {
    const rec: MemberRecord = {
      process: this.o.process,
      since: this.o.clock.now(),
      placing,
      layout: this.o.layout,
      ...(this.o.endsSince !== undefined ? { endsSince: this.o.endsSince } : {}),
    };
    return JSON.stringify(rec);
  }

  /** The processes of the members whose release writes an older store layout than this one. */
  older(): string[] {
    return [...this.live.values()].filter((r) => (r.layout ?? 2) < this.o.layout).map((r) => r.process);
  }

  private onMember(kv: KeyValue, deleted: boolean): void {
    const lease = this.o.keys.tail(this.o.keys.members(), kv.key);
    if (lease === undefined) return;
    if (deleted) {
      if (this.live.has(lease)) this.noteGone(lease);
      this.live.delete(lease);
      this.demand.set(lease, false);
      this.o.onGone(lease);
      return;
    }
    const rec = parseJson<MemberRecord>(kv);
    if (!rec) return;
    this.live.set(lease, rec);
    this.demand.set(lease, rec.placing);
  }

  /** When this process saw `lease`'s record go (its clock), for the leases it saw go: at most GONE_KEPT. */
  goneAt(lease: string): number | undefined {
    return this.gone.get(lease);
  }

  private noteGone(lease: string): void {
    this.gone.set(lease, this.o.clock.now());
    if (this.gone.size > GONE_KEPT) this.gone.delete(this.gone.keys().next().value as string);
  }

  private onCancelKey(kv: KeyValue): void {
    const job = this.o.keys.tail(this.o.keys.cancels(), kv.key);
    if (job !== undefined) this.o.onCancel(job);
  }
}
