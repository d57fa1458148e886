import { describe, expect, it } from 'vitest';
import { DEFAULT_AGENT_CONFIG } from '../../src/agent/agent.ts';
import { DEFAULT_CORE_CONFIG, DEFAULT_RUNTIME, type CoreConfig } from '../../src/agent/defaults.ts';
import { NodeLoad, type NodeLoadHost } from '../../src/monitor/node-load.ts';
import type { Run } from '../../src/monitor/run.ts';
import { Engine } from '../../src/sim/engine.ts';
import { defaultSimRuntime, makePolicy } from '../../src/sim/policies/index.ts';
import { TRUTH_POLICIES } from '../../src/sim/experiments/truths.ts';
import { runSim } from '../../src/sim/run.ts';
import { w3 } from '../../src/sim/workloads.ts';
import { World } from '../../src/sim/world.ts';
import { Keys } from '../../src/state/keys.ts';
import { ProfileBook } from '../../src/state/profiles.ts';
import type { PlacedRuRecord } from '../../src/state/records.ts';
import type { ClusterStore } from '../../src/store/types.ts';
import { ManualClock } from '../../src/util/clock.ts';
import { createLogger } from '../../src/util/log.ts';
import { SeededRng } from '../../src/util/rng.ts';

/** The simulator's tarcil runs the live agents' defaults: the scheduling core's and the run-time loop's. */
describe('live and simulator defaults', () => {
  it("the simulator's tarcil decides with the live agent's core configuration", () => {
    const wl = w3({ jobs: 10 });
    const world = new World(new Engine(), new SeededRng(1), wl.servers, { interference: wl.interference });
    const policy = makePolicy({ name: 'tarcil' }, world, new SeededRng(2));
    const cfg = (policy as unknown as { cfg: CoreConfig }).cfg;
    for (const k of Object.keys(DEFAULT_CORE_CONFIG) as (keyof CoreConfig)[]) expect({ [k]: cfg[k] }).toEqual({ [k]: DEFAULT_AGENT_CONFIG[k] });
    // What bench truths chose (bench/README, truths): two-sided quality.
    expect(DEFAULT_AGENT_CONFIG.twoSided).toBe(true);
  });

  it("the simulator's tarcil runs the live run-time loop's default parts, and `runtime: {}` none", () => {
    expect(defaultSimRuntime()).toEqual({
      ...(DEFAULT_RUNTIME.block ? { block: true } : {}),
      ...(DEFAULT_RUNTIME.learn ? { learn: true } : {}),
      ...(DEFAULT_RUNTIME.move ? { move: true } : {}),
    });
    const def = runSim({ workload: w3({ jobs: 300 }), policy: { name: 'tarcil' }, seed: 3 });
    expect((def.counters.observations ?? 0) > 0).toBe(DEFAULT_RUNTIME.learn);
    expect('blocks' in def.counters).toBe(DEFAULT_RUNTIME.block || DEFAULT_RUNTIME.learn || DEFAULT_RUNTIME.move);
    expect((def.counters.moveChecks ?? 0) > 0).toBe(DEFAULT_RUNTIME.move);
    const none = runSim({ workload: w3({ jobs: 300 }), policy: { name: 'tarcil', runtime: {} }, seed: 3 });
    expect(none.counters.observations).toBeUndefined();
    expect(none.counters.blocks).toBeUndefined();
  });

  it('the live job owner learns profiles by default exactly when the simulator does', () => {
    const book = new ProfileBook({ store: {} as ClusterStore, keys: new Keys('/parity/'), clock: new ManualClock(0), log: createLogger('test', 'silent') });
    expect((book as unknown as { use: string }).use).toBe(DEFAULT_RUNTIME.learn ? 'learned' : 'declared');
  });

  it('a live node monitor blocks its server for a slow task exactly when the simulator would', () => {
    const host: NodeLoadHost = {
      store: {} as ClusterStore,
      keys: new Keys('/parity/'),
      clock: new ManualClock(0),
      executor: { measuresRate: true } as NodeLoadHost['executor'],
      loadThreshold: 0.5,
      // Three times slower than alone: well below the threshold.
      slowdown: () => 3,
      usableLeaseId: () => undefined,
      track: () => undefined,
    };
    const log = createLogger('test', 'silent');
    const load = new NodeLoad(host, { id: 's1', rus: 2 }, () => log);
    const rus = new Map<number, { rec: PlacedRuRecord | undefined; rev: number }>();
    const running = new Map<number, Run>();
    for (let i = 0; i < 2; i++) {
      const rec = { state: 'busy', job: 'j', task: i, caused: [90, 0, 0, 0, 0, 0, 0, 0, 0, 0], priority: 0, commitId: `c${i}` } as unknown as PlacedRuRecord;
      rus.set(i, { rec, rev: i + 1 });
      running.set(i, {
        job: 'j',
        task: i,
        commitId: rec.commitId,
        ruIndex: i,
        rec,
        placedRevision: i + 1,
        rev: i + 1,
        startedAt: 0,
        handle: { rate: () => 1 / 3, setSlowdown: () => undefined, kill: () => Promise.resolve() },
        stopped: false,
        reported: false,
        obs: undefined,
      });
    }
    load.check(rus.values(), running);
    expect(load.blocked).toBe(DEFAULT_RUNTIME.block);
  });

  it('the run-time defaults are the ones bench truths chose across its truths: no blocks, no learning, no moves', () => {
    // bench/README, truths, "The default, chosen across truths".
    expect({ ...DEFAULT_RUNTIME }).toEqual({ block: false, learn: false, move: false });
    expect(defaultSimRuntime()).toEqual({});
  });

  it("bench truths' `tarcil` row is the default configuration, the others named for what they change", () => {
    const tarcil = TRUTH_POLICIES.find((p) => p.name === 'tarcil');
    expect(tarcil?.spec).toEqual({ name: 'tarcil' });
    expect(TRUTH_POLICIES.find((p) => p.name === 'tarcil, no run-time loop')?.spec.runtime).toEqual({});
    expect(TRUTH_POLICIES.find((p) => p.name === 'tarcil + moves')?.spec.runtime).toEqual({ ...defaultSimRuntime(), move: true });
  });
});
