import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  defaultProfilesDir,
  expandCluster,
  scaleCluster,
  loadCatalog,
  loadClusterFile,
  loadWorkloadFile,
  resolveCluster,
  resolveProfile,
} from '../../src/model/catalog.ts';
import { formatPath } from '../../src/model/schema.ts';
import { N_RESOURCES, type ClusterSpec } from '../../src/model/types.ts';
import { isTarcilError } from '../../src/util/errors.ts';

const catalog = loadCatalog();
const sum = (xs: number[]): number => xs.reduce((a, b) => a + b, 0);

describe('shipped catalog', () => {
  it('is found next to the source and loads without errors', () => {
    expect(catalog.dir).toBe(defaultProfilesDir());
    expect(catalog.dir.endsWith('profiles')).toBe(true);
    expect(loadCatalog(catalog.dir).workloads.size).toBe(catalog.workloads.size);
  });

  it('has the ten iBench/Paragon resources in the documented order', () => {
    expect(catalog.resources.map((r) => r.id)).toEqual(['cpu', 'l1i', 'l1d', 'l2', 'llc', 'membw', 'memcap', 'tlb', 'netbw', 'diskbw']);
    expect(catalog.resources).toHaveLength(N_RESOURCES);
  });

  it('validates every shipped file on its own', () => {
    for (const f of readdirSync(join(catalog.dir, 'workloads'))) {
      const w = loadWorkloadFile(join(catalog.dir, 'workloads', f), catalog.platforms);
      expect(catalog.workloads.get(w.name)).toEqual(w);
    }
    for (const f of readdirSync(join(catalog.dir, 'clusters'))) {
      const c = loadClusterFile(join(catalog.dir, 'clusters', f), catalog.platforms);
      expect(catalog.clusters.get(c.name)).toEqual(c);
    }
  });

  it('has at least 12 workloads covering the paper families', () => {
    expect(catalog.workloads.size).toBeGreaterThanOrEqual(12);
    const families = new Set([...catalog.workloads.values()].map((w) => w.family));
    for (const f of ['spark', 'hadoop', 'storm', 'memcached', 'cassandra', 'spec-cpu2006', 'parsec', 'tpch']) {
      expect(families).toContain(f);
    }
    const lc = [...catalog.workloads.values()].filter((w) => w.latencyCritical).map((w) => w.name);
    expect(lc.sort()).toEqual(['cassandra', 'memcached']);
  });

  it('gives every workload a full, in-range vector and a value for every platform', () => {
    for (const w of catalog.workloads.values()) {
      expect(w.caused).toHaveLength(N_RESOURCES);
      for (const c of w.caused) expect(Number.isInteger(c) && c >= 0 && c <= 99).toBe(true);
      expect(Object.keys(w.platformPerf).sort()).toEqual([...catalog.platforms.keys()].sort());
      expect(w.platformPerf[catalog.referencePlatform]).toBe(1);
      expect(w.description.length).toBeGreaterThan(150);
    }
  });

  it('has plausible profiles: compute-bound jobs track core speed, memory-bound ones less', () => {
    const povray = catalog.workloads.get('spec-povray');
    const mcf = catalog.workloads.get('spec-mcf');
    const memcached = catalog.workloads.get('memcached');
    const hadoop = catalog.workloads.get('hadoop-map');
    if (!povray || !mcf || !memcached || !hadoop) throw new Error('missing shipped profile');
    const spread = (perf: Record<string, number>): number => Math.max(...Object.values(perf)) - Math.min(...Object.values(perf));
    for (const [name, p] of catalog.platforms) expect(povray.platformPerf[name]).toBeCloseTo(p.speed, 2);
    expect(spread(mcf.platformPerf)).toBeLessThan(spread(povray.platformPerf));
    // caused order: cpu, l1i, l1d, l2, llc, membw, memcap, tlb, netbw, diskbw
    const [cpu, , , , llc, , , , net, disk] = memcached.caused as [number, number, number, number, number, number, number, number, number, number];
    expect(net).toBeGreaterThan(80);
    expect(llc).toBeGreaterThan(cpu);
    expect(disk).toBeLessThan(10);
    expect(hadoop.caused[9]).toBeGreaterThan(hadoop.caused[0] ?? 100);
    expect(povray.caused[0]).toBeGreaterThan(90);
  });

  it('has a reference platform of speed 1', () => {
    expect(catalog.platforms.get(catalog.referencePlatform)?.speed).toBe(1);
    expect(catalog.referencePlatform).toBe('r3-2xlarge');
  });

  it('freezes shared profiles so one job cannot change another', () => {
    const w = catalog.workloads.get('memcached');
    expect(Object.isFrozen(w)).toBe(true);
    expect(() => {
      (w?.caused as number[])[0] = 1;
    }).toThrow(TypeError);
  });
});

describe('expandCluster', () => {
  const expand = (name: string) => {
    const spec = catalog.clusters.get(name);
    if (!spec) throw new Error(`no cluster ${name}`);
    return { spec, servers: expandCluster(spec, catalog.platforms) };
  };

  it('hetero-400: 400 servers, 4,178 RUs, 10 platforms from 4 to 32 cores', () => {
    const { servers } = expand('hetero-400');
    expect(servers).toHaveLength(400);
    expect(sum(servers.map((s) => s.rus))).toBe(4178);
    const platforms = new Set(servers.map((s) => s.platform));
    expect(platforms.size).toBe(10);
    const cores = servers.map((s) => s.rus);
    expect(Math.min(...cores)).toBe(4);
    expect(Math.max(...cores)).toBe(32);
    expect(new Set(servers.map((s) => s.rack)).size).toBe(10);
    // zone boundaries fall on rack boundaries
    const zonesPerRack = new Map<string, Set<string | undefined>>();
    for (const s of servers) zonesPerRack.set(s.rack, (zonesPerRack.get(s.rack) ?? new Set()).add(s.attributes.zone));
    for (const z of zonesPerRack.values()) expect(z.size).toBe(1);
  });

  it('hollow-10k: 10,000 servers of 16 RUs, two platforms, four zones, SSD on half', () => {
    const { servers } = expand('hollow-10k');
    expect(servers).toHaveLength(10_000);
    expect(servers.every((s) => s.rus === 16)).toBe(true);
    expect(new Set(servers.map((s) => s.platform))).toEqual(new Set(['c3-4xlarge', 'r3-4xlarge']));
    expect(new Set(servers.map((s) => s.attributes.zone)).size).toBe(4);
    expect(servers.filter((s) => s.attributes.ssd === 'true')).toHaveLength(5000);
    expect(new Set(servers.map((s) => s.rack)).size).toBe(250);
  });

  it('scaleCluster: groups scaled in proportion to exactly the count asked for, the mix kept', () => {
    const spec = catalog.clusters.get('hetero-400') as ClusterSpec;
    for (const n of [1, 7, 120, 400, 10_000]) {
      const scaled = scaleCluster(spec, n);
      const servers = expandCluster(scaled, catalog.platforms);
      expect(servers).toHaveLength(n);
      expect(scaled.groups.every((g) => g.count > 0 && spec.groups.some((x) => x.platform === g.platform && x.attributes?.zone === g.attributes?.zone))).toBe(
        true,
      );
    }
    const big = expandCluster(scaleCluster(spec, 10_000), catalog.platforms);
    // 25 of 400 servers are x5650-6c: 625 of 10,000.
    expect(big.filter((s) => s.platform === 'x5650-6c')).toHaveLength(625);
    expect(scaleCluster(spec, 400)).toBe(spec);
    expect(() => scaleCluster(spec, 0)).toThrow(/servers: must be a positive integer/);
  });

  it('ec2-100: 100 r3-2xlarge-like servers of 8 RUs', () => {
    const { servers } = expand('ec2-100');
    expect(servers).toHaveLength(100);
    expect(servers.every((s) => s.rus === 8 && s.platform === 'r3-2xlarge' && s.speed === 1)).toBe(true);
    expect(sum(servers.map((s) => s.rus))).toBe(800);
    expect([...new Set(servers.map((s) => s.rack))]).toEqual(['r000', 'r001', 'r002', 'r003', 'r004']);
  });

  it('demo: 8-12 servers of 2-3 types', () => {
    const { servers } = expand('demo');
    expect(servers.length).toBeGreaterThanOrEqual(8);
    expect(servers.length).toBeLessThanOrEqual(12);
    const types = new Set(servers.map((s) => s.platform)).size;
    expect(types).toBeGreaterThanOrEqual(2);
    expect(types).toBeLessThanOrEqual(3);
  });

  it('assigns stable ids and racks in order, serversPerRack at a time', () => {
    const { spec, servers } = expand('hetero-400');
    expect(servers[0]?.id).toBe('s0000');
    expect(servers[399]?.id).toBe('s0399');
    expect(servers.map((s) => s.id)).toEqual([...servers.map((s) => s.id)].sort());
    servers.forEach((s, i) => {
      expect(s.rack).toBe(`r${String(Math.floor(i / spec.serversPerRack)).padStart(3, '0')}`);
    });
    expect(expandCluster(spec, catalog.platforms)).toEqual(servers);
  });

  it('copies attributes and speed from the group and platform', () => {
    const { servers } = expand('hetero-400');
    const legacy = servers.filter((s) => s.platform === 'x5650-6c');
    expect(legacy).toHaveLength(25);
    expect(legacy.every((s) => s.attributes.ssd === 'false' && s.rus === 6 && s.speed === 0.78)).toBe(true);
    const first = servers[0];
    const second = servers[1];
    if (!first || !second) throw new Error('empty cluster');
    first.attributes.zone = 'mutated';
    expect(second.attributes.zone).toBe('us-east-1a');
  });

  it('widens ids and racks past 10,000 servers so lexical order stays numeric', () => {
    const big: ClusterSpec = { name: 'big', description: '', serversPerRack: 10, groups: [{ platform: 'm3-large', count: 12_000 }] };
    const servers = expandCluster(big, catalog.platforms);
    expect(servers[0]?.id).toBe('s00000');
    expect(servers[11_999]?.id).toBe('s11999');
    expect(servers[11_999]?.rack).toBe('r1199');
    expect(servers[0]?.rack).toBe('r0000');
  });

  it('rejects a malformed spec built in code', () => {
    const bad = { name: 'bad', description: '', serversPerRack: 0, groups: [{ platform: 'm3-large', count: 2 }] };
    expect(() => expandCluster(bad, catalog.platforms)).toThrow("invalid cluster spec 'bad': serversPerRack: must be an integer in [1, 100000]");
  });

  it('rejects a group with an unknown platform', () => {
    const bad: ClusterSpec = { name: 'bad', description: '', serversPerRack: 4, groups: [{ platform: 'c4-xlarge', count: 2 }] };
    let err: unknown;
    try {
      expandCluster(bad, catalog.platforms);
    } catch (e) {
      err = e;
    }
    expect(isTarcilError(err, 'INVALID_ARGUMENT')).toBe(true);
    expect((err as Error).message).toContain('groups[0].platform');
    expect((err as { field?: string }).field).toBe('groups[0].platform');
  });
});

describe('resolveCluster / resolveProfile', () => {
  it('resolves catalog names', () => {
    expect(resolveCluster('ec2-100', catalog).name).toBe('ec2-100');
    expect(resolveProfile('memcached', catalog)).toBe(catalog.workloads.get('memcached'));
  });

  it('resolves paths to files', () => {
    expect(resolveCluster(join(catalog.dir, 'clusters', 'demo.json'), catalog).name).toBe('demo');
    expect(resolveProfile(join(catalog.dir, 'workloads', 'spec-mcf.json'), catalog).name).toBe('spec-mcf');
  });

  it('rejects unknown names, listing the known ones', () => {
    expect(() => resolveCluster('nope', catalog)).toThrow(/cluster: unknown cluster 'nope' \(known: demo, ec2-100, hetero-400/);
    expect(() => resolveProfile('nope', catalog)).toThrow(/profile: unknown workload profile 'nope'/);
  });

  it('rejects missing files naming the file', () => {
    expect(() => resolveCluster('/nonexistent/x.json', catalog)).toThrow(/\/nonexistent\/x\.json: invalid cluster spec: \(file\): cannot be read \(ENOENT\)/);
  });
});

describe('formatPath', () => {
  it('writes paths the way users point at fields', () => {
    expect(formatPath(['caused', 3])).toBe('caused[3]');
    expect(formatPath(['platformPerf', 'c4-xlarge'])).toBe('platformPerf.c4-xlarge');
    expect(formatPath(['groups', 0, 'attributes', 'a b'])).toBe('groups[0].attributes["a b"]');
    expect(formatPath([])).toBe('(root)');
    expect(formatPath([1])).toBe('[1]');
  });
});
