import { EventEmitter } from 'node:events';
import { afterEach, describe, expect, it } from 'vitest';
import type * as grpc from '@grpc/grpc-js';
import { DEFAULT_JOB_WATCH_LIMITS, JobStream, JobWatchHub, SNAPSHOT_BLOCK } from '../../src/frontend/job-watch.ts';
import type { JobEvent } from '../../src/rpc/gen/tarcil/v1/JobEvent.ts';
import type { WatchJobRequest__Output } from '../../src/rpc/gen/tarcil/v1/WatchJobRequest.ts';
import { Keys } from '../../src/state/keys.ts';
import type { LiveJobRecord, LiveTaskRecord } from '../../src/state/live-records.ts';
import { MemoryStore } from '../../src/store/memory.ts';
import { makeJob, TEST_PROFILES } from '../support/jobs.ts';

/** A server stream that takes every write at once and keeps what was written. */
class FakeCall extends EventEmitter {
  readonly events: JobEvent[] = [];
  ended = false;
  onWrite: ((n: number) => void) | undefined;
  write(ev: JobEvent, taken?: () => void): boolean {
    this.events.push(ev);
    this.onWrite?.(this.events.length);
    // The client takes it at once.
    if (taken) queueMicrotask(taken);
    return true;
  }
  end(): void {
    this.ended = true;
  }
}

/**
 * The store as a hub sees it, with the watch of one prefix held back while `hold` is on (etcd's
 * answer to one watcher can come after its answer to another with later changes); `release()`
 * turns holding off and delivers what was held, in order.
 */
function holdingWatch(mem: MemoryStore, prefix: string): { store: MemoryStore; hold: boolean; release(): void } {
  const held: (() => void)[] = [];
  const ctl = {
    hold: false,
    store: new Proxy(mem, {
      get(target, prop) {
        if (prop === 'watch') {
          return (o: Parameters<MemoryStore['watch']>[0]) =>
            target.watch(o.prefix === prefix ? { ...o, onEvents: (b) => (ctl.hold ? held.push(() => o.onEvents(b)) : o.onEvents(b)) } : o);
        }
        const v = Reflect.get(target, prop) as unknown;
        return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
      },
    }),
    release(): void {
      ctl.hold = false;
      for (const deliver of held.splice(0)) deliver();
    },
  };
  return ctl;
}

const turns = async (n: number): Promise<void> => {
  for (let i = 0; i < n; i++) await new Promise((r) => setImmediate(r));
};

let store: MemoryStore | undefined;
afterEach(async () => {
  await store?.close();
  store = undefined;
});

describe('WatchJob streams (JobStream)', () => {
  const spec = { ...makeJob('j1', TEST_PROFILES[0]!, 100), id: 'j1' };
  const job = (state: LiveJobRecord['state']): string => JSON.stringify({ spec, state, placed: 0, updatedAt: 0, submittedAt: 0 } satisfies LiveJobRecord);
  const task = (index: number, state: LiveTaskRecord['state']): string => JSON.stringify({ job: 'j1', index, state, attempt: 0 });

  it('sends the changes of one burst (many revisions in one turn) as one event, at the latest revision', async () => {
    store = new MemoryStore();
    const keys = new Keys('/w/');
    await store.put(keys.job('j1'), job('running'));
    const hub = new JobWatchHub(store, keys);
    const call = new FakeCall();
    const stream = new JobStream(call as unknown as grpc.ServerWritableStream<WatchJobRequest__Output, JobEvent>, 'j1', {
      store,
      keys,
      hub,
      limits: DEFAULT_JOB_WATCH_LIMITS,
    });
    await stream.start();
    expect(call.events).toHaveLength(1); // the snapshot
    // 50 tasks change, each its own revision, without the event loop turning in between.
    const writes: Promise<number>[] = [];
    for (let i = 0; i < 50; i++) writes.push(store.put(keys.task('j1', i), task(i, 'running')));
    const last = Math.max(...(await Promise.all(writes)));
    await turns(3);
    expect(call.events).toHaveLength(2);
    expect(call.events[1]?.tasks?.map((t) => t.index)).toEqual(Array.from({ length: 50 }, (_, i) => i));
    expect(Number(call.events[1]?.revision)).toBe(last);
    stream.finish();
  });

  it('sends a large job block by block on later turns, each task once, with what changed meanwhile after it', async () => {
    store = new MemoryStore({ maxTxnOps: 1000 });
    const keys = new Keys('/w/');
    const n = 2 * SNAPSHOT_BLOCK + 5000;
    await store.put(
      keys.job('j1'),
      JSON.stringify({ spec: { ...spec, tasks: n }, state: 'running', placed: n, updatedAt: 0, submittedAt: 0 } satisfies LiveJobRecord),
    );
    for (let i = 0; i < n; i += 1000) {
      await store.txn({
        compare: [],
        success: Array.from({ length: 1000 }, (_, j) => ({ type: 'put' as const, key: keys.task('j1', i + j), value: task(i + j, 'placed') })),
      });
    }
    const hub = new JobWatchHub(store, keys);
    const call = new FakeCall();
    let turnedAt: number | undefined;
    const first = await store.revision();
    call.onWrite = (count) => {
      if (count !== 1) return;
      // While the first part goes out: a task of the first block and one of the last change.
      void store!.put(keys.task('j1', 5), task(5, 'running'));
      void store!.put(keys.task('j1', n - 1), task(n - 1, 'running'));
      setImmediate(() => (turnedAt ??= call.events.length));
    };
    const stream = new JobStream(call as unknown as grpc.ServerWritableStream<WatchJobRequest__Output, JobEvent>, 'j1', {
      store,
      keys,
      hub,
      limits: DEFAULT_JOB_WATCH_LIMITS,
    });
    await stream.start();
    await turns(3);
    const parts = Math.ceil(n / DEFAULT_JOB_WATCH_LIMITS.tasksPerEvent);
    const snapshot = call.events.slice(0, parts);
    // The event loop turned while the snapshot was being sent.
    expect(turnedAt).toBeLessThan(parts);
    expect(snapshot.every((e) => Number(e.revision) === first)).toBe(true);
    expect(snapshot.map((e) => e.more)).toEqual([...Array<boolean>(parts - 1).fill(true), false]);
    const indexes = snapshot.flatMap((e) => e.tasks?.map((t) => t.index) ?? []);
    expect(indexes).toEqual(Array.from({ length: n }, (_, i) => i));
    // The last block was read after its task changed: the snapshot has it, no delta repeats it.
    expect(snapshot.flatMap((e) => e.tasks ?? []).find((t) => t.index === n - 1)?.state).toBe('running');
    expect(snapshot.flatMap((e) => e.tasks ?? []).find((t) => t.index === 5)?.state).toBe('placed');
    const deltas = call.events.slice(parts);
    expect(deltas.flatMap((e) => e.tasks?.map((t) => [t.index, t.state]) ?? [])).toEqual([[5, 'running']]);
    expect(Number(deltas[0]?.revision)).toBeGreaterThan(first);
    stream.finish();
  });

  it('catches up the changes that came during a snapshot a slice per turn, then sends each changed task once', async () => {
    store = new MemoryStore({ maxTxnOps: 1000 });
    const keys = new Keys('/w/');
    const n = 5000;
    await store.put(
      keys.job('j1'),
      JSON.stringify({ spec: { ...spec, tasks: n }, state: 'running', placed: n, updatedAt: 0, submittedAt: 0 } satisfies LiveJobRecord),
    );
    for (let i = 0; i < n; i += 1000) {
      await store.txn({
        compare: [],
        success: Array.from({ length: 1000 }, (_, j) => ({ type: 'put' as const, key: keys.task('j1', i + j), value: task(i + j, 'placed') })),
      });
    }
    const hub = new JobWatchHub(store, keys);
    const call = new FakeCall();
    const parts = Math.ceil(n / DEFAULT_JOB_WATCH_LIMITS.tasksPerEvent);
    const changed = 3000;
    let turnedBefore: number | undefined;
    call.onWrite = (count) => {
      // While the first part goes out, 3,000 tasks change, one revision each.
      if (count === 1) for (let i = 0; i < changed; i++) void store!.put(keys.task('j1', i), task(i, 'running'));
      // When the snapshot's last part is out: how many events were written before the loop turned.
      if (count === parts) setImmediate(() => (turnedBefore ??= call.events.length));
    };
    const stream = new JobStream(call as unknown as grpc.ServerWritableStream<WatchJobRequest__Output, JobEvent>, 'j1', {
      store,
      keys,
      hub,
      limits: DEFAULT_JOB_WATCH_LIMITS,
    });
    await stream.start();
    await turns(10);
    // The catch-up yielded: the loop turned before the first delta went out.
    expect(turnedBefore).toBe(parts);
    const deltas = call.events.slice(parts);
    const states = deltas.flatMap((e) => e.tasks?.map((t) => [t.index, t.state]) ?? []);
    expect(states).toEqual(Array.from({ length: changed }, (_, i) => [i, 'running']));
    expect(Number(deltas.at(-1)?.revision)).toBe(await store.revision());
    stream.finish();
  });

  it('a job change delivered after a later task change (two watches, as etcd sends them) still reaches the stream at a later revision, and the final state ends it', async () => {
    store = new MemoryStore();
    const keys = new Keys('/w/');
    await store.put(keys.job('j1'), job('running'));
    await store.put(keys.task('j1', 0), task(0, 'running'));
    // The watch of job records delivers only when the test says.
    const w = holdingWatch(store, keys.jobs());
    const reordering = w.store;
    const hub = new JobWatchHub(reordering, keys);
    const call = new FakeCall();
    const stream = new JobStream(call as unknown as grpc.ServerWritableStream<WatchJobRequest__Output, JobEvent>, 'j1', {
      store: reordering,
      keys,
      hub,
      limits: DEFAULT_JOB_WATCH_LIMITS,
    });
    await stream.start();
    expect(call.events).toHaveLength(1);
    w.hold = true;
    // The job becomes final, then a task record changes (a later revision): the task's change
    // arrives and is sent first.
    const finalRev = await store.put(keys.job('j1'), job('succeeded'));
    const taskRev = await store.put(keys.task('j1', 0), task(0, 'succeeded'));
    expect(taskRev).toBeGreaterThan(finalRev);
    await turns(3);
    expect(call.events.at(-1)?.tasks?.map((t) => [t.index, t.state])).toEqual([[0, 'succeeded']]);
    expect(call.ended).toBe(false);
    // Then the job's change, behind what was sent: it cannot go out under its own revision (they
    // increase along a stream), so the stream sends the job again, read once the store has moved
    // past the last revision sent, and that ends it.
    w.release();
    await new Promise((r) => setTimeout(r, 120));
    expect(call.ended).toBe(false);
    const later = await store.put('/w/elsewhere', 'x');
    for (let i = 0; i < 40 && !call.ended; i++) await new Promise((r) => setTimeout(r, 25));
    expect(call.ended).toBe(true);
    const last = call.events.at(-1);
    expect(last?.job?.state).toBe('succeeded');
    expect(Number(last?.revision)).toBe(later);
    // Revisions along the stream increase from one whole event to the next.
    const whole = call.events.filter((e) => !e.more).map((e) => Number(e.revision));
    expect(whole).toEqual([...whole].sort((x, y) => x - y));
    expect(new Set(whole).size).toBe(whole.length);
  });

  it('a change the snapshot already holds, delivered late by a lagging watch, is no news: nothing is sent again', async () => {
    store = new MemoryStore();
    const keys = new Keys('/w/');
    await store.put(keys.job('j1'), job('running'));
    await store.put(keys.task('j1', 0), task(0, 'placed'));
    const w = holdingWatch(store, keys.allTasks());
    const lagging = w.store;
    const hub = new JobWatchHub(lagging, keys);
    const open = (): { call: FakeCall; stream: JobStream } => {
      const call = new FakeCall();
      return {
        call,
        stream: new JobStream(call as unknown as grpc.ServerWritableStream<WatchJobRequest__Output, JobEvent>, 'j1', {
          store: lagging,
          keys,
          hub,
          limits: DEFAULT_JOB_WATCH_LIMITS,
        }),
      };
    };
    const a = open();
    await a.stream.start();
    w.hold = true;
    await store.put(keys.task('j1', 0), task(0, 'running'));
    // A second stream opens now: its snapshot reads the task running, before the watch delivers it.
    const b = open();
    await b.stream.start();
    expect(b.call.events).toHaveLength(1);
    expect(b.call.events[0]?.tasks?.map((t) => t.state)).toEqual(['running']);
    w.release();
    // The store moves on (a resend would read past the last revision sent, and go out).
    await store.put('/w/elsewhere', 'x');
    await new Promise((r) => setTimeout(r, 150));
    // The first stream had not seen it: news. The second had: nothing more, not the job again.
    expect(a.call.events.at(-1)?.tasks?.map((t) => [t.index, t.state])).toEqual([[0, 'running']]);
    expect(b.call.events).toHaveLength(1);
    a.stream.finish();
    b.stream.finish();
  });

  it('parses a change once for all the streams of its job, and keeps nothing after handing it out', async () => {
    store = new MemoryStore();
    const keys = new Keys('/w/');
    await store.put(keys.job('j1'), job('running'));
    const hub = new JobWatchHub(store, keys);
    const seen: LiveTaskRecord[][] = [[], []];
    const offs = await Promise.all(
      seen.map((list) =>
        hub.subscribe('j1', {
          onBatch: (b) => b.events.forEach((e) => list.push(hub.record<LiveTaskRecord>(e.kv)!)),
          onError: () => undefined,
        }),
      ),
    );
    await store.put(keys.task('j1', 7), task(7, 'succeeded'));
    await turns(2);
    expect(seen[0]).toHaveLength(1);
    expect(seen[0]?.[0]).toMatchObject({ index: 7, state: 'succeeded' });
    // The same object reached both streams.
    expect(seen[1]?.[0]).toBe(seen[0]?.[0]);
    // Outside a hand-out, a record is parsed afresh (nothing is held for the store's history).
    const kv = (await store.get(keys.task('j1', 7)))!;
    expect(hub.record<LiveTaskRecord>(kv)).not.toBe(hub.record<LiveTaskRecord>(kv));
    for (const off of offs) off();
  });

  it('streams opened together share one read of the job and one encoding of each event', async () => {
    store = new MemoryStore();
    const keys = new Keys('/w/');
    await store.put(keys.job('j1'), job('running'));
    const hub = new JobWatchHub(store, keys);
    let reads = 0;
    const txn = store.txn.bind(store);
    store.txn = (t) => {
      reads++;
      return txn(t);
    };
    const calls = Array.from({ length: 5 }, () => new FakeCall());
    const streams = calls.map(
      (call) =>
        new JobStream(call as unknown as grpc.ServerWritableStream<WatchJobRequest__Output, JobEvent>, 'j1', {
          store: store!,
          keys,
          hub,
          limits: DEFAULT_JOB_WATCH_LIMITS,
        }),
    );
    await Promise.all(streams.map((st) => st.start()));
    expect(reads).toBe(1);
    expect(hub.generations).toBe(1);
    for (const call of calls) expect(call.events).toHaveLength(1);
    // The very same encoded event reached every stream.
    expect(new Set(calls.map((c) => c.events[0])).size).toBe(1);
    await store.put(keys.task('j1', 3), task(3, 'running'));
    await turns(3);
    for (const call of calls) expect(call.events.at(-1)?.tasks?.map((t) => [t.index, t.state])).toEqual([[3, 'running']]);
    expect(new Set(calls.map((c) => c.events[1])).size).toBe(1);
    for (const st of streams) st.finish();
    expect(hub.generations).toBe(0);
    expect(hub.watches).toBe(0);
  });
});
