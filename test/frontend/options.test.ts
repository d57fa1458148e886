/**
 * The front-end's and the monitor's options modules: the ranges an operator may set are checked
 * before anything starts (nothing is written, nothing listens), and the command line shows the
 * defaults the modules hold.
 */
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { checkSchedulerOptions, FRONTEND_LIMITS, SERVER_DEFAULTS, UP_DEFAULTS } from '../../src/frontend/options.ts';
import { startScheduler } from '../../src/frontend/runtime.ts';
import { startMonitor } from '../../src/node/runtime.ts';
import { loadCatalog } from '../../src/model/catalog.ts';
import { checkMonitorOptions, HOLLOW_DEFAULTS } from '../../src/monitor/options.ts';
import { DEFAULT_RUNTIME } from '../../src/monitor/runtime-loop.ts';
import { Keys } from '../../src/state/keys.ts';
import { openStore } from '../../src/store/index.ts';
import type { ClusterStore } from '../../src/store/types.ts';
import { SystemClock } from '../../src/util/clock.ts';
import { TarcilError } from '../../src/util/errors.ts';
import { createLogger } from '../../src/util/log.ts';
import { SeededRng } from '../../src/util/rng.ts';

const BIN = fileURLToPath(new URL('../../src/cli/bin.js', import.meta.url));
const keys = new Keys('/options-test/');
const log = createLogger('test', 'silent');
let store: ClusterStore;

beforeAll(async () => {
  store = await openStore(inject('etcdEndpoint').replace('http://', 'etcd://'));
});

afterAll(async () => {
  await store.close();
});

function refusal(f: () => unknown): { code: string; field: string | undefined; message: string } {
  try {
    f();
  } catch (e) {
    expect(e).toBeInstanceOf(TarcilError);
    const t = e as TarcilError;
    return { code: t.code, field: t.field, message: t.message };
  }
  throw new Error('not refused');
}

describe('front-end options', () => {
  const ok = { agents: 2, port: 0 };

  it('accepts the defaults and the ends of every range', () => {
    expect(() =>
      checkSchedulerOptions({
        ...ok,
        leaseTtlSeconds: SERVER_DEFAULTS.leaseTtlSeconds,
        retainMs: SERVER_DEFAULTS.retainMs,
        compactMarginMs: SERVER_DEFAULTS.compactMarginMs,
      }),
    ).not.toThrow();
    const L = FRONTEND_LIMITS;
    expect(() =>
      checkSchedulerOptions({
        agents: L.agents.max,
        port: L.port.max,
        retainMs: L.retainMs.min,
        compactMarginMs: 0,
        unplaceableTimeoutMs: L.unplaceableTimeoutMs.min,
        departedMemoryMs: 0,
        launchAfterMs: L.launchAfterMs.min,
      }),
    ).not.toThrow();
    expect(() => checkSchedulerOptions({ ...ok, launchAfterMs: L.launchAfterMs.max })).not.toThrow();
  });

  it('refuses a value out of range naming the option and the rule', () => {
    expect(refusal(() => checkSchedulerOptions({ ...ok, agents: 0 }))).toMatchObject({
      code: 'INVALID_ARGUMENT',
      field: 'agents',
      message: 'agents: must be an integer in [1, 64]',
    });
    expect(refusal(() => checkSchedulerOptions({ ...ok, retainMs: 999 })).field).toBe('retainMs');
    expect(refusal(() => checkSchedulerOptions({ ...ok, compactMarginMs: 5000 })).message).toBe(
      'compactMarginMs: must be 0 (off) or an integer in [10000, 86400000]',
    );
    expect(refusal(() => checkSchedulerOptions({ ...ok, leaseTtlSeconds: 1.5 })).field).toBe('leaseTtlSeconds');
    expect(refusal(() => checkSchedulerOptions({ ...ok, unplaceableTimeoutMs: 10 })).field).toBe('unplaceableTimeoutMs');
    expect(refusal(() => checkSchedulerOptions({ ...ok, launchAfterMs: 60_001 })).message).toBe('launchAfterMs: must be an integer in [0, 60000]');
  });

  it('startScheduler refuses bad options before it writes or listens (real etcd)', async () => {
    // Every write under the prefix from now on (other test files write to the same etcd, so its
    // revision says nothing): a marker written after the refusal closes the list.
    const seen: string[] = [];
    const w = await store.watch({
      prefix: keys.prefix,
      fromRevision: (await store.revision()) + 1,
      onEvents: (b) => seen.push(...b.events.map((e) => e.kv.key)),
      onError: () => undefined,
    });
    await expect(
      startScheduler({
        name: 'bad',
        store,
        keys,
        catalog: loadCatalog(),
        clock: new SystemClock(),
        rng: new SeededRng(1),
        log,
        agents: 65,
        host: '127.0.0.1',
        port: 0,
      }),
    ).rejects.toMatchObject({ code: 'INVALID_ARGUMENT', message: 'agents: must be an integer in [1, 64]' });
    const marker = `${keys.prefix}zz-marker`;
    await store.put(marker, '1');
    const until = Date.now() + 10_000;
    while (!seen.includes(marker) && Date.now() < until) await new Promise((r) => setTimeout(r, 20));
    await w.close();
    expect(seen).toEqual([marker]);
    await store.delete(marker);
    expect((await store.range(keys.prefix)).kvs).toHaveLength(0);
  });
});

describe('monitor options', () => {
  it('refuses a load threshold outside (0, 1], a lease TTL or a grace out of range', () => {
    expect(() => checkMonitorOptions({ loadThreshold: 1, leaseTtlSeconds: 600, disconnectGraceMs: 0 })).not.toThrow();
    expect(refusal(() => checkMonitorOptions({ loadThreshold: 0 })).field).toBe('loadThreshold');
    expect(refusal(() => checkMonitorOptions({ loadThreshold: 1.5 })).field).toBe('loadThreshold');
    expect(refusal(() => checkMonitorOptions({ leaseTtlSeconds: 0 })).field).toBe('leaseTtlSeconds');
    expect(refusal(() => checkMonitorOptions({ disconnectGraceMs: -1 })).field).toBe('disconnectGraceMs');
  });

  it('startMonitor refuses bad options before it registers (real etcd)', async () => {
    const server = { id: 'opt-s1', platform: 'r3-2xlarge', rack: 'r0', rus: 2, speed: 1, attributes: {} };
    await expect(
      startMonitor({ store, keys, clock: new SystemClock(), log, server, executor: 'simulated', host: '127.0.0.1', port: 0, loadThreshold: 2 }),
    ).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    expect((await store.range(keys.prefix)).kvs).toHaveLength(0);
  });
});

describe('the command line reads its defaults from the options modules', () => {
  const help = (cmd: string): string => spawnSync(process.execPath, [BIN, cmd, '--help'], { encoding: 'utf8' }).stdout.replace(/\s+/g, ' ');

  it('tarcil server, up and hollow show the modules’ defaults', () => {
    const server = help('server');
    expect(server).toContain(`--agents <n> scheduling agents in this process (default: ${SERVER_DEFAULTS.agents})`);
    expect(server).toContain(`(default: ${SERVER_DEFAULTS.port})`);
    expect(server).toContain(`(default: "${SERVER_DEFAULTS.prefix}", env: TARCIL_PREFIX)`);
    expect(server).toMatch(/--departed-memory <duration> .* \(default: 10m\)/);
    expect(server).toMatch(/--unplaceable-timeout <duration> .* \(default: 5m\)/);
    expect(server).toMatch(/--launch-after <duration> .* \(default: 500ms\)/);
    const up = help('up');
    expect(up).toContain(`scheduling agents (default: ${UP_DEFAULTS.agents})`);
    expect(up).toContain(`(default: ${UP_DEFAULTS.metricsPort})`);
    const hollow = help('hollow');
    expect(hollow).toContain(`(default: "${HOLLOW_DEFAULTS.cluster}")`);
    expect(hollow).toContain(`(default: ${HOLLOW_DEFAULTS.killFraction})`);
  });

  it('tarcil monitor, hollow and up switch blocks, server and up choose the profiles, each by default as DEFAULT_RUNTIME says', () => {
    for (const cmd of ['monitor', 'hollow', 'up']) {
      const h = help(cmd);
      expect(h, cmd).toMatch(/--block while a task runs well below its expected rate.*? \(default: (on|off)\)/);
      expect(/--block while a task runs .*? \(default: (on|off)\)/.exec(h)?.[1], cmd).toBe(DEFAULT_RUNTIME.block ? 'on' : 'off');
      expect(h, cmd).toContain('--no-block never block the server');
    }
    for (const cmd of ['server', 'up']) {
      const h = help(cmd);
      expect(/--profiles <declared\|learned> .*? \(default: "(\w+)"\)/.exec(h)?.[1], cmd).toBe(DEFAULT_RUNTIME.learn ? 'learned' : 'declared');
    }
  });

  it('--profiles other than declared or learned is refused with the flag and the rule (exit code 2)', () => {
    const r = spawnSync(process.execPath, [BIN, 'server', '--profiles', 'measured'], { encoding: 'utf8' });
    expect(r.status).toBe(2);
    expect(r.stderr).toContain("--profiles must be declared (each job's own profile) or learned");
    expect(r.stderr).toContain("(got 'measured')");
  });

  it('a flag out of the module’s range is refused with exit code 2', () => {
    const r = spawnSync(process.execPath, [BIN, 'server', '--unplaceable-timeout', '500ms'], { encoding: 'utf8' });
    expect(r.status).toBe(2);
    expect(r.stderr).toContain('--unplaceable-timeout must be a duration');
    expect(r.stderr).toContain('at least 1s, at most 168h');
  });
});
