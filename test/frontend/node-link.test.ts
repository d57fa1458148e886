import { afterEach, describe, expect, it } from 'vitest';
import { GrpcNodeLink, LocalNodes, localNodes, type ServedNode } from '../../src/frontend/node.ts';
import { startMonitor, type MonitorProcess } from '../../src/frontend/runtime.ts';
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
    const mon: MonitorProcess = await startMonitor({ store, keys: new Keys('/local/'), clock, log, server: solo, executor: 'simulated', host: '127.0.0.1', port: 0 });
    const endpoint = `127.0.0.1:${mon.port}`;
    expect(localNodes.get(endpoint)).toBeDefined();
    const link = new GrpcNodeLink({ local: localNodes });
    closers.push(() => link.close());
    await expect(link.launch(endpoint, { server: 'solo', job: 'j', task: 0, ruIndex: 0, revision: 1 })).resolves.toBeUndefined();
    // The same refusals as over gRPC, as the service's own errors.
    await expect(link.launch(endpoint, { server: 'other', job: 'j', task: 0, ruIndex: 0, revision: 1 })).rejects.toMatchObject({ code: 'FAILED_PRECONDITION' });
    await expect(link.launch(endpoint, { server: 'solo', job: 'j', task: 0, ruIndex: 9, revision: 1 })).rejects.toMatchObject({ code: 'INVALID_ARGUMENT', field: 'ru_index' });
    expect(await link.kill(endpoint, { server: 'solo', job: 'nope', task: 0, reason: 'test' })).toBe(false);
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
    const err = await link.kill('here:1', { server: 'solo', job: 'j', task: 0, reason: 'x' }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(TarcilError);
    expect((err as TarcilError).code).toBe('DEADLINE_EXCEEDED');
    off();
    expect(local.get('here:1')).toBeUndefined();
    link.close();
  });
});
