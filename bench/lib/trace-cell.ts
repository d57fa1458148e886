/**
 * A live cell for a production trace's node list: a profiles directory (TARCIL_PROFILES) whose
 * platforms are the package's and the trace's, and a cluster file of the trace's servers, for
 * `tarcil hollow --cluster <file>` and the front-ends that validate jobs against those platforms.
 *
 * A catalog platform has one core count (its servers' RUs), and a trace platform (a GPU model, or
 * `cpu`) has nodes of several: each (platform, cores) pair of the node list becomes a platform of
 * its own, named `<platform, lower case>-<cores>c` (e.g. `t4-104c`), and a job allowed a trace
 * platform is allowed each of its live platforms. The new platforms have speed 1 and every
 * workload profile runs at 1 on them (the simulator's default for a platform a profile does not
 * name); memory, storage and network are nominal (the mapping counts cores only).
 */
import { copyFileSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { defaultProfilesDir } from '../../src/model/catalog.ts';
import type { Trace } from '../../src/workload/trace.ts';

export interface TraceCell {
  /** The profiles directory to give every process as TARCIL_PROFILES. */
  profilesDir: string;
  /** The cluster file for `tarcil hollow --cluster`. */
  clusterFile: string;
  /** Trace platform → its live platforms (one per core count). */
  platforms: Map<string, string[]>;
  servers: number;
  rus: number;
}

/** Servers a rack, as the simulator's replay builds them (the trace gives no racks). */
const SERVERS_PER_RACK = 40;
const CATALOG_NAME = /^[a-z0-9][a-z0-9-]{0,63}$/;

/** The live platform of the trace's servers of `platform` with `cores` RUs. */
export function livePlatform(platform: string, cores: number): string {
  const name = `${platform.toLowerCase().replace(/[._]/g, '-')}-${cores}c`;
  if (!CATALOG_NAME.test(name))
    throw new Error(`trace platform '${platform}' (${cores} cores): its live name '${name}' is not a catalog name (1–64 of a-z, 0-9, -)`);
  return name;
}

/** The live platforms a job allowed `platforms` (trace names; undefined: any) may run on. */
export function livePlatforms(cell: TraceCell, platforms: readonly string[] | undefined): string[] | undefined {
  return platforms?.flatMap((p) => cell.platforms.get(p) ?? []);
}

/** Writes the profiles directory and the cluster file of `trace`'s servers under `dir`. */
export function writeTraceCell(trace: Trace, dir: string): TraceCell {
  const base = defaultProfilesDir();
  const profilesDir = join(dir, 'profiles');
  mkdirSync(join(profilesDir, 'workloads'), { recursive: true });
  mkdirSync(join(profilesDir, 'clusters'), { recursive: true });
  copyFileSync(join(base, 'resources.json'), join(profilesDir, 'resources.json'));

  const groups = new Map<string, { count: number; cores: number; trace: string }>();
  const platforms = new Map<string, string[]>();
  const owner = new Map<string, string>();
  for (const s of trace.servers) {
    const name = livePlatform(s.platform, s.rus);
    const was = owner.get(name);
    if (was !== undefined && was !== s.platform) throw new Error(`trace platforms '${was}' and '${s.platform}' both become the live platform '${name}'`);
    owner.set(name, s.platform);
    const g = groups.get(name);
    if (g) g.count++;
    else {
      groups.set(name, { count: 1, cores: s.rus, trace: s.platform });
      platforms.set(s.platform, [...(platforms.get(s.platform) ?? []), name]);
    }
  }

  const plat = JSON.parse(readFileSync(join(base, 'platforms.json'), 'utf8')) as { platforms: { name: string }[] };
  for (const name of groups.keys())
    if (plat.platforms.some((p) => p.name === name)) throw new Error(`the live platform '${name}' is a platform of the catalog already`);
  plat.platforms.push(
    ...[...groups].map(([name, g]) => ({
      name,
      description: `The trace's ${g.trace} nodes of ${g.cores} cores (speed 1; memory, storage and network nominal: the trace's mapping counts cores only).`,
      cores: g.cores,
      speed: 1,
      memoryGiB: 4 * g.cores,
      storageGiB: 0,
      networkGbps: 10,
    })),
  );
  writeFileSync(join(profilesDir, 'platforms.json'), `${JSON.stringify(plat, null, 2)}\n`);

  for (const f of readdirSync(join(base, 'workloads')).filter((x) => x.endsWith('.json'))) {
    const w = JSON.parse(readFileSync(join(base, 'workloads', f), 'utf8')) as { platformPerf: Record<string, number> };
    for (const name of groups.keys()) w.platformPerf[name] = 1;
    writeFileSync(join(profilesDir, 'workloads', f), `${JSON.stringify(w, null, 2)}\n`);
  }
  for (const f of readdirSync(join(base, 'clusters')).filter((x) => x.endsWith('.json')))
    copyFileSync(join(base, 'clusters', f), join(profilesDir, 'clusters', f));

  const clusterFile = join(dir, 'trace-cell.json');
  const cluster = {
    name: 'trace-cell',
    description: `A production trace's node list: ${trace.servers.length} servers, one platform per GPU model (or cpu) and core count.`,
    serversPerRack: SERVERS_PER_RACK,
    groups: [...groups].map(([platform, g]) => ({ platform, count: g.count })),
  };
  writeFileSync(clusterFile, `${JSON.stringify(cluster, null, 2)}\n`);
  return { profilesDir, clusterFile, platforms, servers: trace.servers.length, rus: trace.servers.reduce((a, s) => a + s.rus, 0) };
}
