/**
 * An election over the ClusterStore's own primitives (leases, transactions, watches), used by every
 * store: the MemoryStore, the EtcdStore, and the test wrappers that inject faults into one
 * process's store. It is etcd's concurrency election: each candidate creates
 * `election/<name>/<lease id>` bound to its own lease; the candidate whose key is oldest (lowest
 * create revision) leads; the others each wait for the deletion of the key created just before
 * their own, and look again whenever that watch ends (etcd restarted, history compacted). The keys
 * are laid out as etcd's election clients lay them out, so such a client can stand in, or read, the
 * same election.
 */
import { TarcilError } from '../util/errors.ts';
import type { Campaign, ClusterStore, KeyValue, Lease, WatchHandle } from './types.ts';

/** Where the candidates of election `name` keep their keys (etcd3's `Election.prefix`). */
export function electionPrefix(name: string): string {
  return `election/${name}/`;
}

/** The oldest candidate's key and value: the leader's (undefined when nobody stands). */
export async function oldestCandidate(store: ClusterStore, name: string): Promise<KeyValue | undefined> {
  const res = await store.range(electionPrefix(name));
  let first: KeyValue | undefined;
  for (const kv of res.kvs) if (!first || kv.createRevision < first.createRevision) first = kv;
  return first;
}

/** The oldest candidate's value: the leader's. */
export async function storeLeader(store: ClusterStore, name: string): Promise<string | undefined> {
  return (await oldestCandidate(store, name))?.value;
}

const never = new Promise<void>(() => undefined);

export class StoreCampaign implements Campaign {
  private lease: Lease | undefined;
  private ownKey: string | undefined;
  private resigned = false;
  private failure: Error | undefined;
  private callbacks: Array<(err: Error) => void> = [];
  private readonly done: Promise<void>;
  /** Wakes the wait for the predecessor's deletion (resign, failure). */
  private wake: (() => void) | undefined;

  constructor(
    private readonly store: ClusterStore,
    private readonly name: string,
    private readonly value: string,
    private readonly ttlSeconds: number,
  ) {
    this.done = this.run();
    this.done.catch((err: unknown) => this.fail(err instanceof Error ? err : new Error(String(err))));
  }

  elected(): Promise<void> {
    return this.done;
  }

  key(): string | undefined {
    return this.ownKey;
  }

  onLost(cb: (err: Error) => void): void {
    if (this.resigned) return;
    const err = this.failure;
    if (err) queueMicrotask(() => cb(err));
    else this.callbacks.push(cb);
  }

  async resign(): Promise<void> {
    if (this.resigned) return;
    this.resigned = true;
    this.callbacks = [];
    this.wake?.();
    await this.lease?.revoke();
  }

  private async run(): Promise<void> {
    const lease = await this.store.grantLease(this.ttlSeconds);
    if (this.resigned) {
      await lease.revoke().catch(() => undefined);
      return never;
    }
    this.lease = lease;
    lease.onLost((err) => this.fail(err));
    const prefix = electionPrefix(this.name);
    const key = `${prefix}${lease.id}`;
    this.ownKey = key;
    const res = await this.store.txn({
      compare: [{ key, target: 'create', op: '==', value: 0 }],
      success: [{ type: 'put', key, value: this.value, lease: lease.id }],
      failure: [{ type: 'get', key }],
    });
    const mine = res.succeeded ? res.revision : (res.responses[0]?.[0]?.createRevision ?? res.revision);
    for (;;) {
      this.check();
      if (this.resigned) return never;
      const all = await this.store.range(prefix);
      let before: KeyValue | undefined;
      for (const kv of all.kvs) {
        if (kv.createRevision < mine && (!before || kv.createRevision > before.createRevision)) before = kv;
      }
      if (!before) {
        this.check();
        return this.resigned ? never : undefined;
      }
      await this.deleted(before.key, all.revision);
    }
  }

  /** Resolves when `key` is deleted after `revision`, the watch ends, or the campaign is over. */
  private async deleted(key: string, revision: number): Promise<void> {
    let over = false;
    let handle: WatchHandle | undefined;
    await new Promise<void>((resolve) => {
      const end = (): void => {
        over = true;
        resolve();
      };
      this.wake = end;
      this.store
        .watch({
          prefix: key,
          fromRevision: revision + 1,
          // A prefix watch: lease ids of other lengths may share the prefix.
          onEvents: (b) => {
            if (b.events.some((e) => e.type === 'delete' && e.kv.key === key)) end();
          },
          // Ended (compacted, etcd restarted): look again.
          onError: () => end(),
        })
        .then(
          (h) => {
            handle = h;
            if (over) void h.close().catch(() => undefined);
          },
          (err: unknown) => {
            this.fail(err instanceof Error ? err : new TarcilError('UNAVAILABLE', String(err)));
            end();
          },
        );
    });
    this.wake = undefined;
    await handle?.close().catch(() => undefined);
  }

  /** Throws the failure that ended the campaign meanwhile, if any. */
  private check(): void {
    const err = this.failure;
    if (err) throw err;
  }

  private fail(err: Error): void {
    if (this.resigned || this.failure) return;
    this.failure = err;
    this.wake?.();
    // A failed candidate gives up its key, so that it does not hold up the others.
    void this.lease?.revoke().catch(() => undefined);
    const callbacks = this.callbacks;
    this.callbacks = [];
    for (const cb of callbacks) {
      try {
        cb(err);
      } catch {
        // A callback's own failure is its business.
      }
    }
  }
}
