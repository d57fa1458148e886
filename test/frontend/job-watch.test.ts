import { EventEmitter } from 'node:events';
import { afterEach, describe, expect, it } from 'vitest';
import type * as grpc from '@grpc/grpc-js';
import { DEFAULT_JOB_WATCH_LIMITS, JobStream, JobWatchHub } from '../../src/frontend/job-watch.ts';
import type { JobEvent } from '../../src/frontend/gen/tarcil/v1/JobEvent.ts';
import type { WatchJobRequest__Output } from '../../src/frontend/gen/tarcil/v1/WatchJobRequest.ts';
import { Keys } from '../../src/state/keys.ts';
import type { LiveJobRecord, LiveTaskRecord } from '../../src/state/live-records.ts';
import { MemoryStore } from '../../src/store/memory.ts';
import { makeJob, TEST_PROFILES } from '../support/jobs.ts';

/** A server stream that takes every write at once and keeps what was written. */
class FakeCall extends EventEmitter {
  readonly events: JobEvent[] = [];
  ended = false;
  write(ev: JobEvent): boolean {
    this.events.push(ev);
    return true;
  }
  end(): void {
    this.ended = true;
  }
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
    const stream = new JobStream(call as unknown as grpc.ServerWritableStream<WatchJobRequest__Output, JobEvent>, 'j1', { store, keys, hub, limits: DEFAULT_JOB_WATCH_LIMITS });
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
});
