import { describe, expect, it } from 'vitest';
import { Engine } from '../../src/sim/engine.ts';
import { COPYSET_ATTR } from '../../src/sim/constants.ts';
import { BLOCK_ATTR_PREFIX, placeReplicas, replicaAttributes } from '../../src/sim/replicas.ts';
import { runSim } from '../../src/sim/run.ts';
import { w2 } from '../../src/sim/workloads.ts';
import { World } from '../../src/sim/world.ts';
import { SeededRng } from '../../src/util/rng.ts';

const firstStage = (variant: 'resident' | 'hetero', replication?: 'random' | 'copysets'): { data: number[]; servers: ReturnType<typeof w2>['servers'] }[] => {
  const wl = w2({ variant, queries: 20, ...(replication ? { replication } : {}) });
  const world = new World(new Engine(), new SeededRng(1), wl.servers, { interference: false, utilEvery: 0 });
  const out: { data: number[]; servers: typeof wl.servers }[] = [];
  for (const q of wl.jobs(world, new SeededRng(3))) for (const t of q.tasks) if (t.data) out.push({ data: t.data, servers: wl.servers });
  return out;
};

describe('W2 input replicas', () => {
  it('random (the default): each block on three servers of two racks, named by a block attribute they all hold', () => {
    const tasks = firstStage('hetero');
    expect(tasks.length).toBe(20 * 33);
    const triples = new Set<string>();
    for (const { data, servers } of tasks) {
      expect(new Set(data).size).toBe(3);
      const specs = data.map((s) => servers[s]!);
      // HDFS's default: the second replica on another rack than the first, the third on the second's.
      expect(specs[1]!.rack).not.toBe(specs[0]!.rack);
      expect(specs[2]!.rack).toBe(specs[1]!.rack);
      const held = replicaAttributes(specs);
      expect(held).toBeDefined();
      const [key] = Object.keys(held!);
      expect(key!.startsWith(BLOCK_ATTR_PREFIX)).toBe(true);
      // No server but the three holds that block.
      expect(servers.filter((s) => s.attributes[key!] !== undefined)).toHaveLength(3);
      triples.add([...data].sort((a, b) => a - b).join(','));
    }
    // Not a few fixed triplets: far more distinct replica sets than the 33 copysets.
    expect(triples.size).toBeGreaterThan(200);
  });

  it('copysets (the ablation): every block on one of the fixed triplets, named by the copyset attribute', () => {
    const tasks = firstStage('resident', 'copysets');
    const triples = new Set<string>();
    for (const { data, servers } of tasks) {
      const specs = data.map((s) => servers[s]!);
      expect(replicaAttributes(specs)).toEqual({ [COPYSET_ATTR]: specs[0]!.attributes[COPYSET_ATTR] });
      triples.add([...data].sort((a, b) => a - b).join(','));
    }
    expect(triples.size).toBeLessThanOrEqual(33);
  });

  it('replicaAttributes: none for servers that share no block or copyset', () => {
    const { servers } = placeReplicas(
      w2({ variant: 'resident', queries: 1 }).servers.map((s) => ({ ...s, attributes: {} })),
      'random',
      5,
    );
    const holders = new Set(servers.flatMap((s, i) => (Object.keys(s.attributes).length > 0 ? [i] : [])));
    const strangers = servers.filter((_, i) => !holders.has(i)).slice(0, 3);
    expect(replicaAttributes(strangers)).toBeUndefined();
  });

  for (const replication of ['random', 'copysets'] as const) {
    it(`tarcil, centralized and sparrow run every scan task on a replica (${replication})`, () => {
      for (const policy of ['tarcil', 'centralized', 'sparrow']) {
        const r = runSim({ workload: w2({ variant: 'hetero', queries: 30, load: 0.2, replication }), policy: { name: policy, agents: 4 }, seed: 5 });
        expect(r.summary.locality).toBe(1);
      }
    });
  }
});
