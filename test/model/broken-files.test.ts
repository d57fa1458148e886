import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { defaultProfilesDir, loadCatalog, loadClusterFile, loadWorkloadFile } from '../../src/model/catalog.ts';
import { TarcilError } from '../../src/util/errors.ts';

type Json = Record<string, unknown>;

const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

/** A private copy of the shipped profiles with one or more files changed. */
function brokenCopy(edit: (dir: string) => void): string {
  const dir = mkdtempSync(join(tmpdir(), 'tarcil-profiles-'));
  dirs.push(dir);
  cpSync(defaultProfilesDir(), dir, { recursive: true });
  edit(dir);
  return dir;
}

function editJson(dir: string, rel: string, f: (j: Json) => void): void {
  const path = join(dir, rel);
  const j = JSON.parse(readFileSync(path, 'utf8')) as Json;
  f(j);
  writeFileSync(path, JSON.stringify(j, null, 2));
}

function loadError(dir: string): TarcilError {
  try {
    loadCatalog(dir);
  } catch (e) {
    if (e instanceof TarcilError) return e;
    throw e;
  }
  throw new Error('expected loadCatalog to fail');
}

const caused = (j: Json): number[] => j.caused as number[];
const perf = (j: Json): Record<string, number> => j.platformPerf as Record<string, number>;
const groups = (j: Json): Json[] => j.groups as Json[];
const platforms = (j: Json): Json[] => j.platforms as Json[];

interface Case {
  what: string;
  file: string;
  edit: (j: Json) => void;
  field: string;
  rule: string;
}

const cases: Case[] = [
  {
    what: 'caused value of 100',
    file: 'workloads/spec-mcf.json',
    edit: (j) => void (caused(j)[3] = 100),
    field: 'caused[3]',
    rule: 'must be an integer in [0, 99]',
  },
  {
    what: 'negative caused value',
    file: 'workloads/memcached.json',
    edit: (j) => void (caused(j)[0] = -1),
    field: 'caused[0]',
    rule: 'must be an integer in [0, 99]',
  },
  {
    what: 'fractional caused value',
    file: 'workloads/memcached.json',
    edit: (j) => void (caused(j)[5] = 4.5),
    field: 'caused[5]',
    rule: 'must be an integer in [0, 99]',
  },
  { what: 'caused of length 9', file: 'workloads/spark-lr.json', edit: (j) => void caused(j).pop(), field: 'caused', rule: 'must have exactly 10 entries' },
  {
    what: 'string in caused',
    file: 'workloads/spark-lr.json',
    edit: (j) => void (caused(j)[1] = '40' as unknown as number),
    field: 'caused[1]',
    rule: 'must be an integer in [0, 99]',
  },
  {
    what: 'platform missing from platformPerf',
    file: 'workloads/cassandra.json',
    edit: (j) => void delete perf(j)['c3-8xlarge'],
    field: 'platformPerf.c3-8xlarge',
    rule: 'is missing (every platform in platforms.json needs a value)',
  },
  {
    what: 'unknown platform in platformPerf',
    file: 'workloads/cassandra.json',
    edit: (j) => void (perf(j)['c4-xlarge'] = 1.1),
    field: 'platformPerf.c4-xlarge',
    rule: 'is not a platform in platforms.json',
  },
  {
    what: 'non-positive platformPerf',
    file: 'workloads/tpch-join.json',
    edit: (j) => void (perf(j)['m3-large'] = 0),
    field: 'platformPerf.m3-large',
    rule: 'must be a number in (0, 100]',
  },
  { what: 'unknown field in a workload', file: 'workloads/tpch-join.json', edit: (j) => void (j.weight = 3), field: 'weight', rule: 'is not a known field' },
  {
    what: 'missing typicalDurationMs',
    file: 'workloads/tpch-agg.json',
    edit: (j) => void delete j.typicalDurationMs,
    field: 'typicalDurationMs',
    rule: 'is required',
  },
  {
    what: 'latencyCritical as a string',
    file: 'workloads/tpch-agg.json',
    edit: (j) => void (j.latencyCritical = 'yes'),
    field: 'latencyCritical',
    rule: 'must be true or false',
  },
  {
    what: 'workload name differs from its file',
    file: 'workloads/spec-gcc.json',
    edit: (j) => void (j.name = 'gcc'),
    field: 'name',
    rule: "must match the file name ('spec-gcc')",
  },
  {
    what: 'workload name with a dot',
    file: 'workloads/spec-gcc.json',
    edit: (j) => void (j.name = 'spec.gcc'),
    field: 'name',
    rule: 'must be 1-64 characters of a-z, 0-9 and -',
  },
  {
    what: 'cluster group with an unknown platform',
    file: 'clusters/demo.json',
    edit: (j) => void ((groups(j)[1] as Json).platform = 'c4-xlarge'),
    field: 'groups[1].platform',
    rule: "'c4-xlarge' is not a platform in platforms.json",
  },
  {
    what: 'zero servers per rack',
    file: 'clusters/ec2-100.json',
    edit: (j) => void (j.serversPerRack = 0),
    field: 'serversPerRack',
    rule: 'must be an integer in [1, 100000]',
  },
  {
    what: 'fractional group count',
    file: 'clusters/ec2-100.json',
    edit: (j) => void ((groups(j)[0] as Json).count = 99.5),
    field: 'groups[0].count',
    rule: 'must be an integer in [1, 1000000]',
  },
  {
    what: 'non-string attribute value',
    file: 'clusters/demo.json',
    edit: (j) => void ((groups(j)[0] as Json).attributes = { ssd: true }),
    field: 'groups[0].attributes.ssd',
    rule: 'must be a string of at most 256 characters',
  },
  { what: 'no groups', file: 'clusters/demo.json', edit: (j) => void (j.groups = []), field: 'groups', rule: 'must list at least one server group' },
  {
    what: 'duplicate platform',
    file: 'platforms.json',
    edit: (j) => void (platforms(j)[1] = { ...platforms(j)[0] }),
    field: 'platforms[1].name',
    rule: "duplicates entry 0 ('m3-large')",
  },
  {
    what: 'zero cores',
    file: 'platforms.json',
    edit: (j) => void ((platforms(j)[2] as Json).cores = 0),
    field: 'platforms[2].cores',
    rule: 'must be an integer in [1, 4096]',
  },
  {
    what: 'unknown reference platform',
    file: 'platforms.json',
    edit: (j) => void (j.reference = 'c4-xlarge'),
    field: 'reference',
    rule: "must name a platform listed in platforms ('c4-xlarge' is not)",
  },
  {
    what: 'reference platform speed not 1',
    file: 'platforms.json',
    edit: (j) => void ((platforms(j)[7] as Json).speed = 1.1),
    field: 'platforms[7].speed',
    rule: 'must be 1 on the reference platform',
  },
  {
    what: 'nine resources',
    file: 'resources.json',
    edit: (j) => void (j.resources as Json[]).pop(),
    field: 'resources',
    rule: 'must list exactly 10 resources',
  },
  {
    what: 'duplicate resource id',
    file: 'resources.json',
    edit: (j) => void ((j.resources as Json[])[9] = { ...(j.resources as Json[])[0] }),
    field: 'resources[9].id',
    rule: "duplicates entry 0 ('cpu')",
  },
];

describe('broken profile files are rejected naming file, field and rule', () => {
  it.each(cases)('$what', ({ file, edit, field, rule }) => {
    const dir = brokenCopy((d) => editJson(d, file, edit));
    const err = loadError(dir);
    expect(err.code).toBe('INVALID_ARGUMENT');
    expect(err.field).toBe(field);
    expect(err.message).toContain(`${join(dir, file)}: invalid profile data: `);
    expect(err.message).toContain(`${field}: ${rule}`);
  });

  it('rejects a file that is not JSON', () => {
    const dir = brokenCopy((d) => writeFileSync(join(d, 'workloads', 'storm-wordcount.json'), '{ "name": "storm-wordcount", '));
    const err = loadError(dir);
    expect(err.field).toBe('(file)');
    expect(err.message).toMatch(/storm-wordcount\.json: invalid profile data: \(file\): is not valid JSON/);
  });

  it('collects every issue of a file into one line and every file into one error', () => {
    const dir = brokenCopy((d) => {
      editJson(d, 'workloads/spec-mcf.json', (j) => {
        caused(j)[0] = 100;
        caused(j)[9] = -3;
        j.typicalDurationMs = -1;
        delete perf(j)['x5650-6c'];
      });
      editJson(d, 'clusters/hetero-400.json', (j) => void ((groups(j)[2] as Json).platform = 'x5650'));
    });
    const err = loadError(dir);
    const lines = err.message.split('\n');
    expect(lines).toHaveLength(2);
    const mcf = lines.find((l) => l.includes('spec-mcf.json'));
    expect(mcf).toContain('caused[0]: must be an integer in [0, 99]');
    expect(mcf).toContain('caused[9]: must be an integer in [0, 99]');
    expect(mcf).toContain('typicalDurationMs: must be a number in (0, 604800000]');
    const hetero = lines.find((l) => l.includes('hetero-400.json'));
    expect(hetero).toContain("groups[2].platform: 'x5650' is not a platform in platforms.json");
    const issues = err.details?.issues as { file: string; field: string }[];
    expect(issues.map((i) => i.field)).toEqual(['caused[0]', 'caused[9]', 'typicalDurationMs', 'groups[2].platform']);
  });

  it('reports the platform coverage of a workload only once platforms.json itself is valid', () => {
    const dir = brokenCopy((d) => {
      editJson(d, 'platforms.json', (j) => void ((platforms(j)[0] as Json).cores = -2));
      editJson(d, 'workloads/spec-mcf.json', (j) => void delete perf(j)['x5650-6c']);
    });
    const err = loadError(dir);
    expect(err.message).toContain('platforms[0].cores: must be an integer in [1, 4096]');
    expect(err.message).not.toContain('spec-mcf.json');
  });

  it("refuses a key '__proto__' in a map (JSON.parse keeps it as an ordinary key; dropping it would change the data)", () => {
    const proto = (v: unknown): Json => JSON.parse(`{"__proto__":${JSON.stringify(v)}}`) as Json;
    const attrs = loadError(brokenCopy((d) => editJson(d, 'clusters/demo.json', (j) => void ((groups(j)[0] as Json).attributes = proto('nowhere')))));
    expect(attrs.message).toContain("groups[0].attributes: key '__proto__' is not allowed");
    const perfs = loadError(brokenCopy((d) => editJson(d, 'workloads/memcached.json', (j) => void (j.platformPerf = { ...perf(j), ...proto(1) }))));
    expect(perfs.message).toContain("platformPerf: key '__proto__' is not allowed");
  });

  it("checks the coverage of a platform named like a member of Object.prototype ('constructor')", () => {
    const dir = brokenCopy((d) => editJson(d, 'platforms.json', (j) => void platforms(j).push({ ...(platforms(j)[0] as Json), name: 'constructor' })));
    const err = loadError(dir);
    expect(err.message).toContain('platformPerf.constructor: is missing (every platform in platforms.json needs a value)');
  });

  it('rejects a missing directory', () => {
    expect(() => loadCatalog('/nonexistent/profiles')).toThrow(/\/nonexistent\/profiles: profiles directory not found/);
  });

  it('single-file loaders name the file too', () => {
    const dir = brokenCopy((d) => {
      editJson(d, 'clusters/demo.json', (j) => void ((groups(j)[0] as Json).count = 0));
      editJson(d, 'workloads/memcached.json', (j) => void (caused(j)[4] = 120));
    });
    expect(() => loadClusterFile(join(dir, 'clusters/demo.json'))).toThrow(
      `${join(dir, 'clusters/demo.json')}: invalid cluster spec: groups[0].count: must be an integer in [1, 1000000]`,
    );
    expect(() => loadWorkloadFile(join(dir, 'workloads/memcached.json'))).toThrow(
      `${join(dir, 'workloads/memcached.json')}: invalid workload profile: caused[4]: must be an integer in [0, 99]`,
    );
  });
});
