/**
 * TARCIL_PROFILES names the catalog's directory for every process: a cell of platforms the
 * package's catalog does not name (a production trace's node list, bench/lib/trace-cell.ts).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { livePlatform, livePlatforms, writeTraceCell } from '../../bench/lib/trace-cell.ts';
import { defaultProfilesDir, expandCluster, loadCatalog, parseJobSpec, PROFILES_ENV, resolveCluster } from '../../src/model/catalog.ts';
import type { Trace } from '../../src/workload/trace.ts';

const trace: Trace = {
  format: 'alibaba',
  compress: 1,
  servers: [
    { id: 'n0', platform: 'cpu', rus: 32, gpus: 0 },
    { id: 'n1', platform: 'cpu', rus: 64, gpus: 0 },
    { id: 'n2', platform: 'V100M32', rus: 96, gpus: 8 },
    { id: 'n3', platform: 'cpu', rus: 32, gpus: 0 },
  ],
  jobs: [],
  unmappable: [],
};

describe('TARCIL_PROFILES', () => {
  const dirs: string[] = [];
  afterEach(() => {
    delete process.env[PROFILES_ENV];
    for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
  });

  it("gives loadCatalog another directory: a trace cell's platforms, its servers with their own RUs, its jobs held to them", () => {
    const dir = mkdtempSync(join(tmpdir(), 'tarcil-profiles-'));
    dirs.push(dir);
    const cell = writeTraceCell(trace, dir);
    expect(() => loadCatalog().platforms.get('cpu-32c')).not.toThrow();
    expect(loadCatalog().platforms.has('cpu-32c')).toBe(false);
    process.env[PROFILES_ENV] = cell.profilesDir;
    expect(defaultProfilesDir()).toBe(cell.profilesDir);
    const catalog = loadCatalog();
    expect([...catalog.platforms.keys()]).toEqual(expect.arrayContaining(['cpu-32c', 'cpu-64c', 'v100m32-96c', 'r3-2xlarge']));
    for (const w of catalog.workloads.values()) expect(w.platformPerf['v100m32-96c']).toBe(1);
    const servers = expandCluster(resolveCluster(cell.clusterFile, catalog), catalog.platforms);
    expect(servers.map((s) => [s.platform, s.rus]).sort()).toEqual([
      ['cpu-32c', 32],
      ['cpu-32c', 32],
      ['cpu-64c', 64],
      ['v100m32-96c', 96],
    ]);
    expect(cell.rus).toBe(224);
    expect(livePlatforms(cell, ['cpu'])?.sort()).toEqual(['cpu-32c', 'cpu-64c']);
    expect(livePlatforms(cell, undefined)).toBeUndefined();
    const job = parseJobSpec(
      {
        name: 'p',
        profile: 'memcached',
        tasks: 4,
        durationMs: 1000,
        mode: 'gang',
        locality: { mode: 'pack', scope: 'server' },
        constraints: { platforms: livePlatforms(cell, ['V100M32']) },
      },
      catalog,
      { id: 'p', now: 0 },
    );
    expect(job.constraints.platforms).toEqual(['v100m32-96c']);
    expect(livePlatform('V100M32', 96)).toBe('v100m32-96c');
  });

  it('refuses a directory without platforms.json, naming the variable', () => {
    process.env[PROFILES_ENV] = join(tmpdir(), 'no-such-profiles-dir');
    expect(() => loadCatalog()).toThrow(/TARCIL_PROFILES: must name a profiles directory holding platforms.json/);
  });
});
