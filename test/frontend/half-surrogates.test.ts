import * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { nodeMonitorClient, schedulerClient } from '../../src/cli/grpc-clients.ts';
import type { NodeMonitorClient } from '../../src/rpc/gen/tarcil/v1/NodeMonitor.ts';
import type { SchedulerClient } from '../../src/rpc/gen/tarcil/v1/Scheduler.ts';
import type { SchedulerProcess } from '../../src/frontend/runtime.ts';
import { startMonitor, type MonitorProcess } from '../../src/node/runtime.ts';
import { Keys } from '../../src/state/keys.ts';
import { MemoryStore } from '../../src/store/memory.ts';
import { SystemClock } from '../../src/util/clock.ts';
import { createLogger } from '../../src/util/log.ts';
import { startTestScheduler } from '../support/live.ts';

/**
 * A refusal that quotes a request's text must still be sendable: grpc-js percent-encodes a status
 * message with encodeURI, which throws on a lone surrogate, and then the call is never answered
 * (and the process sees an unhandled rejection). Text with emoji cut by code units, or a parser's
 * message quoting half of one, is answered like any other refusal.
 */
const clock = new SystemClock();
const log = createLogger('half-surrogates', 'silent');
const keys = new Keys('/half-surrogates/');
const solo = { id: 'solo', platform: 'r3-xlarge', rack: 'r0', rus: 2, speed: 1, attributes: {} };
let store: MemoryStore;
let sched: SchedulerProcess;
let mon: MonitorProcess;
let c: SchedulerClient;
let n: NodeMonitorClient;
const rejections: unknown[] = [];
const onRejection = (e: unknown): void => void rejections.push(e);

beforeAll(async () => {
  process.on('unhandledRejection', onRejection);
  store = new MemoryStore();
  mon = await startMonitor({ store, keys, clock, log, server: solo, executor: 'simulated', host: '127.0.0.1', port: 0 });
  sched = await startTestScheduler({ name: 'half-surrogates', agents: 1, seed: 1, store, keys, clock, log });
  c = schedulerClient(`127.0.0.1:${sched.port}`);
  n = nodeMonitorClient(`127.0.0.1:${mon.port}`);
});
afterAll(async () => {
  process.off('unhandledRejection', onRejection);
  c?.close();
  n?.close();
  await sched?.close();
  await mon?.close();
  await store?.close();
});

type Answer = { code: number; details: string };
function call(client: object, rpc: string, req: object): Promise<Answer> {
  return new Promise((resolve) => {
    const fn = (client as Record<string, (r: object, o: grpc.CallOptions, cb: (e: grpc.ServiceError | null) => void) => void>)[rpc];
    fn!.call(client, req, { deadline: new Date(Date.now() + 5000) }, (e) =>
      resolve(e ? { code: e.code, details: e.details } : { code: grpc.status.OK, details: '' }),
    );
  });
}

/** Emoji after one and after two ASCII characters: a cut at any even or odd position halves one in one of them. */
const emoji = (count: number): string[] => ['x', 'xx'].map((p) => p + '🙂'.repeat(count));

describe('refusals quoting text with emoji are answered', () => {
  it('SubmitJob: spec_json that is not JSON because of an emoji', async () => {
    for (const specJson of ['🙂', '{"name": 🙂}']) {
      const r = await call(c, 'SubmitJob', { specJson });
      expect(r.code, specJson).toBe(grpc.status.INVALID_ARGUMENT);
      expect(r.details).toContain('spec_json: must be valid JSON');
    }
  });

  it('SubmitJob: a request namespace and a spec namespace that differ, both long and of emoji', async () => {
    for (const ns of emoji(60)) {
      const r = await call(c, 'SubmitJob', { spec: { name: 'a', profileName: 'spark-lr', tasks: 1, durationMs: 1, namespace: ns }, namespace: `${ns}x` });
      expect(r.code).toBe(grpc.status.INVALID_ARGUMENT);
      expect(r.details).toContain('give one, or the same');
    }
  });

  it('ListJobs: an unknown state of emoji', async () => {
    for (const st of emoji(40)) {
      const r = await call(c, 'ListJobs', { states: [st] });
      expect(r.code).toBe(grpc.status.INVALID_ARGUMENT);
      expect(r.details).toContain('states[0]');
    }
  });

  it("NodeMonitor: another server's id of emoji, longer than a status message", async () => {
    for (const server of emoji(600)) {
      const r = await call(n, 'GetStats', { server });
      expect(r.code).toBe(grpc.status.FAILED_PRECONDITION);
      expect(r.details).toContain("this NodeMonitor serves server 'solo'");
    }
  });

  it('left no unhandled rejection', () => {
    expect(rejections).toEqual([]);
  });
});
