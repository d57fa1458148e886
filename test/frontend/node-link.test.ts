import * as grpc from '@grpc/grpc-js';
import { afterEach, describe, expect, it } from 'vitest';
import { nodeMonitorClient } from '../../src/cli/grpc-clients.ts';
import { LocalNodes, localNodes, type ServedNode } from '../../src/node/monitor-service.ts';
import { GrpcNodeLink } from '../../src/frontend/node-link.ts';
import { startMonitor, type MonitorProcess } from '../../src/node/runtime.ts';
import { Keys } from '../../src/state/keys.ts';
import { MemoryStore } from '../../src/store/memory.ts';
import { SystemClock } from '../../src/util/clock.ts';
import { TarcilError } from '../../src/util/errors.ts';
import { createLogger } from '../../src/util/log.ts';

const clock = new SystemClock();
const log = createLogger('test', 'warn');
const solo = { id: 'solo', platform: 'r3-xlarge', rack: 'r0', rus: 2, speed: 1, attributes: {} };

let closers: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of closers.reverse()) await c();
  closers = [];
});

describe('owners reach the monitors of their own process without gRPC', () => {
  it('a monitor started in this process is called directly, with the NodeMonitor rules, until it closes', async () => {
    const store = new MemoryStore();
    closers.push(() => store.close());
    const mon: MonitorProcess = await startMonitor({
      store,
      keys: new Keys('/local/'),
      clock,
      log,
      server: solo,
      executor: 'simulated',
      host: '127.0.0.1',
      port: 0,
    });
    const endpoint = `127.0.0.1:${mon.port}`;
    expect(localNodes.get(endpoint)).toBeDefined();
    const link = new GrpcNodeLink({ local: localNodes });
    closers.push(() => link.close());
    await expect(link.launch(endpoint, { server: 'solo', job: 'j', task: 0, ruIndex: 0, revision: 1 })).resolves.toBeUndefined();
    // The same refusals as over gRPC, as the service's own errors.
    await expect(link.launch(endpoint, { server: 'other', job: 'j', task: 0, ruIndex: 0, revision: 1 })).rejects.toMatchObject({ code: 'FAILED_PRECONDITION' });
    await expect(link.launch(endpoint, { server: 'solo', job: 'j', task: 0, ruIndex: 9, revision: 1 })).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
      field: 'ru_index',
    });
    expect(await link.kill(endpoint, { server: 'solo', job: 'nope', task: 0, reason: 'cancelled' })).toBe(false);
    await mon.close();
    expect(localNodes.get(endpoint)).toBeUndefined();
  });

  it('a local call that does not answer fails at the deadline an RPC would have', async () => {
    const local = new LocalNodes();
    const never: ServedNode = {
      server: solo,
      launch: () => new Promise(() => undefined),
      kill: () => new Promise(() => undefined),
      snapshot: () => {
        throw new Error('unused');
      },
      readLog: () => new Promise(() => undefined),
    };
    const off = local.add('here:1', () => never);
    const link = new GrpcNodeLink({ local, deadlineMs: 50 });
    const err = await link.kill('here:1', { server: 'solo', job: 'j', task: 0, reason: 'cancelled' }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(TarcilError);
    expect((err as TarcilError).code).toBe('DEADLINE_EXCEEDED');
    off();
    expect(local.get('here:1')).toBeUndefined();
    link.close();
  });
});

describe('KillTask', () => {
  it('refuses a reason the proto does not list (it would become the task’s message), over gRPC and locally', async () => {
    const store = new MemoryStore();
    closers.push(() => store.close());
    const mon = await startMonitor({ store, keys: new Keys('/kill/'), clock, log, server: solo, executor: 'simulated', host: '127.0.0.1', port: 0 });
    closers.push(() => mon.close());
    const endpoint = `127.0.0.1:${mon.port}`;
    const c = nodeMonitorClient(endpoint);
    closers.push(() => c.close());
    const kill = (reason: string): Promise<{ code: number; details: string; killed?: boolean }> =>
      new Promise((resolve) =>
        c.KillTask({ server: 'solo', job: 'j-1', task: 0, reason }, { deadline: new Date(Date.now() + 10_000) }, (e, r) =>
          resolve(e ? { code: e.code, details: e.details } : { code: grpc.status.OK, details: '', killed: r?.killed ?? false }),
        ),
      );
    for (const reason of ['because', 'Cancelled', 'cancelled\u001b[2J', 'x'.repeat(10_000)]) {
      const r = await kill(reason);
      expect(r.code, reason.slice(0, 20)).toBe(grpc.status.INVALID_ARGUMENT);
      expect(r.details).toContain('reason: must be one of cancelled, preempted');
    }
    for (const reason of ['', 'cancelled', 'preempted']) expect(await kill(reason)).toMatchObject({ code: grpc.status.OK, killed: false });
    const link = new GrpcNodeLink({ local: localNodes });
    closers.push(() => link.close());
    await expect(link.kill(endpoint, { server: 'solo', job: 'j-1', task: 0, reason: 'because' })).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
      field: 'reason',
    });
  });
});
