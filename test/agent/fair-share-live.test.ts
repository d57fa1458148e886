import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { schedulerClient } from '../../src/cli/grpc-clients.ts';
import type { SchedulerClient } from '../../src/rpc/gen/tarcil/v1/Scheduler.ts';
import type { SchedulerProcess } from '../../src/frontend/runtime.ts';
import type { MonitorProcess } from '../../src/node/runtime.ts';
import { Keys } from '../../src/state/keys.ts';
import { openStore } from '../../src/store/index.ts';
import type { ClusterStore } from '../../src/store/types.ts';
import { putNamespace } from '../../src/tenancy/namespaces.ts';
import { SystemClock } from '../../src/util/clock.ts';
import { createLogger } from '../../src/util/log.ts';
import { getJob, submit, waitFinal } from '../support/live.ts';
import { startSimNode, startTestScheduler } from '../support/live.ts';

/**
 * Fair share live, on the embedded store: namespace a fills the one 4-RU server and keeps a
 * backlog; namespace b's job, submitted after, is served before a's backlog (the order of
 * completions, not their times, is checked).
 */
const clock = new SystemClock();
const log = createLogger('fair-live');
const spec = (name: string, tasks: number, durationMs: number): string => JSON.stringify({ name, profile: 'spark-lr', tasks, durationMs });

describe('fair share between namespaces (live, embedded store)', () => {
  let store: ClusterStore;
  let sched: SchedulerProcess;
  let monitor: MonitorProcess;
  let c: SchedulerClient;
  const keys = new Keys(`/fair-live-${Date.now()}/`);

  beforeAll(async () => {
    store = await openStore('memory://');
    await putNamespace(store, keys, 'a', {}, clock.now());
    await putNamespace(store, keys, 'b', {}, clock.now());
    monitor = await startSimNode({ store, keys, clock, log });
    sched = await startTestScheduler({ name: 'fair', store, keys, clock, log, agents: 2, seed: 5 });
    c = schedulerClient(`127.0.0.1:${sched.port}`);
  });
  afterAll(async () => {
    c?.close();
    await sched?.close();
    await monitor?.close();
    await store?.close();
  });

  it("b's job is served before a's backlog: most of a's jobs finish after it", async () => {
    const aJobs: string[] = [];
    for (let i = 0; i < 6; i++) aJobs.push((await submit(c, { specJson: spec(`a${i}`, 4, 400), namespace: 'a' })).jobId);
    // a holds the server: its first job runs, the other five wait.
    for (;;) {
      const j = await getJob(c, aJobs[0] as string);
      if (j.state === 'running' || j.state === 'succeeded') break;
      await new Promise((r) => setTimeout(r, 20));
    }
    const b = await submit(c, { specJson: spec('b0', 2, 50), namespace: 'b' });
    expect(b.jobId.startsWith('b/')).toBe(true);
    const bDone = await waitFinal(c, b.jobId);
    expect(bDone.state).toBe('succeeded');
    const aDone = await Promise.all(aJobs.map((id) => waitFinal(c, id)));
    expect(aDone.every((j) => j.state === 'succeeded')).toBe(true);
    // Without fair share b's job waits behind a's five (priority, then arrival) and at most the
    // last one or two of a's finish after it; with it, b takes the next RUs that free.
    const after = aDone.filter((j) => j.finishedAtMs > bDone.finishedAtMs).length;
    expect(after).toBeGreaterThanOrEqual(4);
  });
});
