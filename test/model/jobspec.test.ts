import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { expandCluster, loadCatalog, parseJobSpec } from '../../src/model/catalog.ts';
import { validateJobSpec, type JobSpecInput } from '../../src/model/schema.ts';
import { DEFAULT_PRIORITY } from '../../src/model/types.ts';
import { TarcilError } from '../../src/util/errors.ts';

const catalog = loadCatalog();
const opts = { id: 'job-0001', now: 1_700_000_000_000 };
const base = { name: 'wordcount-1', profile: 'spark-lr', tasks: 20, durationMs: 100 };
const vector = [10, 20, 30, 40, 50, 60, 70, 80, 90, 5];

function rejection(input: unknown): TarcilError {
  try {
    parseJobSpec(input, catalog, opts);
  } catch (e) {
    if (e instanceof TarcilError) return e;
    throw e;
  }
  throw new Error(`accepted: ${JSON.stringify(input)}`);
}

const without = (key: keyof typeof base): Record<string, unknown> => {
  const copy: Record<string, unknown> = { ...base };
  delete copy[key];
  return copy;
};

interface Bad {
  what: string;
  input: unknown;
  field: string;
  rule: string;
}

const bad: Bad[] = [
  { what: 'missing name', input: without('name'), field: 'name', rule: 'is required' },
  { what: 'empty name', input: { ...base, name: '' }, field: 'name', rule: "must be 1-128 characters of A-Z, a-z, 0-9, '.', '_' and '-'" },
  { what: 'oversized name', input: { ...base, name: 'x'.repeat(129) }, field: 'name', rule: 'must be 1-128 characters' },
  { what: 'name with a space', input: { ...base, name: 'my job' }, field: 'name', rule: 'must be 1-128 characters' },
  { what: 'name with a slash', input: { ...base, name: 'a/b' }, field: 'name', rule: 'must be 1-128 characters' },
  { what: 'numeric name', input: { ...base, name: 42 }, field: 'name', rule: 'must be 1-128 characters' },
  { what: 'missing tasks', input: without('tasks'), field: 'tasks', rule: 'is required' },
  { what: 'NaN tasks', input: { ...base, tasks: NaN }, field: 'tasks', rule: 'must be an integer in [1, 100000]' },
  { what: 'Infinity tasks', input: { ...base, tasks: Infinity }, field: 'tasks', rule: 'must be an integer in [1, 100000]' },
  { what: 'zero tasks', input: { ...base, tasks: 0 }, field: 'tasks', rule: 'must be an integer in [1, 100000]' },
  { what: 'negative tasks', input: { ...base, tasks: -5 }, field: 'tasks', rule: 'must be an integer in [1, 100000]' },
  { what: 'huge tasks', input: { ...base, tasks: 100_001 }, field: 'tasks', rule: 'must be an integer in [1, 100000]' },
  { what: 'fractional tasks', input: { ...base, tasks: 2.5 }, field: 'tasks', rule: 'must be an integer in [1, 100000]' },
  { what: 'tasks as a string', input: { ...base, tasks: '20' }, field: 'tasks', rule: 'must be an integer in [1, 100000]' },
  { what: 'non-integer priority', input: { ...base, priority: 1.5 }, field: 'priority', rule: 'must be an integer in [0, 999]' },
  { what: 'priority too high', input: { ...base, priority: 1000 }, field: 'priority', rule: 'must be an integer in [0, 999]' },
  { what: 'negative priority', input: { ...base, priority: -1 }, field: 'priority', rule: 'must be an integer in [0, 999]' },
  { what: 'missing profile', input: without('profile'), field: 'profile', rule: 'is required' },
  { what: 'unknown profile', input: { ...base, profile: 'nope' }, field: 'profile', rule: "unknown workload profile 'nope' (known: cassandra, " },
  { what: 'profile of the wrong type', input: { ...base, profile: 7 }, field: 'profile', rule: 'must be a workload profile name or an inline profile object' },
  { what: 'caused of length 9', input: { ...base, profile: { caused: vector.slice(0, 9) } }, field: 'profile.caused', rule: 'must have exactly 10 entries' },
  { what: 'caused of length 11', input: { ...base, profile: { caused: [...vector, 1] } }, field: 'profile.caused', rule: 'must have exactly 10 entries' },
  {
    what: 'caused with 100',
    input: { ...base, profile: { caused: vector.map((c, i) => (i === 2 ? 100 : c)) } },
    field: 'profile.caused[2]',
    rule: 'must be an integer in [0, 99]',
  },
  {
    what: 'caused with -1',
    input: { ...base, profile: { caused: vector.map((c, i) => (i === 0 ? -1 : c)) } },
    field: 'profile.caused[0]',
    rule: 'must be an integer in [0, 99]',
  },
  {
    what: 'caused with NaN',
    input: { ...base, profile: { caused: vector.map((c, i) => (i === 7 ? NaN : c)) } },
    field: 'profile.caused[7]',
    rule: 'must be an integer in [0, 99]',
  },
  { what: 'inline profile without caused', input: { ...base, profile: { name: 'x' } }, field: 'profile.caused', rule: 'is required' },
  {
    what: 'inline platformPerf for an unknown platform',
    input: { ...base, profile: { caused: vector, platformPerf: { 'c4-xlarge': 1.2 } } },
    field: 'profile.platformPerf.c4-xlarge',
    rule: "unknown platform 'c4-xlarge'",
  },
  {
    what: 'inline platformPerf of zero',
    input: { ...base, profile: { caused: vector, platformPerf: { 'm3-large': 0 } } },
    field: 'profile.platformPerf.m3-large',
    rule: 'must be a number in (0, 100]',
  },
  {
    what: 'unknown key in an inline profile',
    input: { ...base, profile: { caused: vector, tolerated: vector } },
    field: 'profile.tolerated',
    rule: 'is not a known field',
  },
  {
    what: 'unknown platform in constraints',
    input: { ...base, constraints: { platforms: ['r3-2xlarge', 'c4-xlarge'] } },
    field: 'constraints.platforms[1]',
    rule: "unknown platform 'c4-xlarge'",
  },
  { what: 'empty platform list', input: { ...base, constraints: { platforms: [] } }, field: 'constraints.platforms', rule: 'must list at least one platform' },
  {
    what: 'non-string attribute',
    input: { ...base, constraints: { attributes: { ssd: true } } },
    field: 'constraints.attributes.ssd',
    rule: 'must be a string',
  },
  { what: 'dataServers not an array', input: { ...base, constraints: { dataServers: 's0001' } }, field: 'constraints.dataServers', rule: 'must be an array' },
  { what: 'unknown top-level key', input: { ...base, cpus: 4 }, field: 'cpus', rule: 'is not a known field' },
  { what: 'unknown key in locality', input: { ...base, locality: { mode: 'pack', level: 'rack' } }, field: 'locality.level', rule: 'is not a known field' },
  { what: 'unknown locality mode', input: { ...base, locality: { mode: 'nearby' } }, field: 'locality.mode', rule: "must be 'any', 'pack' or 'spread'" },
  { what: 'unknown locality scope', input: { ...base, locality: { scope: 'zone' } }, field: 'locality.scope', rule: "must be 'server' or 'rack'" },
  { what: 'unknown commit mode', input: { ...base, mode: 'eager' }, field: 'mode', rule: "must be 'incremental' or 'gang'" },
  { what: 'negative maxQueueMs', input: { ...base, maxQueueMs: -1 }, field: 'maxQueueMs', rule: 'must be an integer in [0, 86400000]' },
  { what: 'maxQueueMs over a day', input: { ...base, maxQueueMs: 86_400_001 }, field: 'maxQueueMs', rule: 'must be an integer in [0, 86400000]' },
  { what: 'neither duration nor command', input: without('durationMs'), field: 'durationMs', rule: 'is required unless command is given' },
  { what: 'zero duration', input: { ...base, durationMs: 0 }, field: 'durationMs', rule: 'must be a number in (0, 604800000]' },
  { what: 'duration over 7 days', input: { ...base, durationMs: 7 * 86_400_000 + 1 }, field: 'durationMs', rule: 'must be a number in (0, 604800000]' },
  { what: 'NaN duration', input: { ...base, durationMs: NaN }, field: 'durationMs', rule: 'must be a number in (0, 604800000]' },
  { what: 'Infinity duration', input: { ...base, durationMs: Infinity }, field: 'durationMs', rule: 'must be a number in (0, 604800000]' },
  { what: 'empty argv', input: { ...base, command: { argv: [] } }, field: 'command.argv', rule: 'must have at least one element' },
  { what: 'empty program name', input: { ...base, command: { argv: ['', 'x'] } }, field: 'command.argv', rule: 'must not start with an empty program name' },
  { what: 'argv not strings', input: { ...base, command: { argv: ['sleep', 1] } }, field: 'command.argv[1]', rule: 'must be a string without NUL characters' },
  { what: 'argv with NUL', input: { ...base, command: { argv: ['sh', 'a\0b'] } }, field: 'command.argv[1]', rule: 'must be a string without NUL characters' },
  { what: 'non-string env value', input: { ...base, command: { argv: ['true'], env: { N: 1 } } }, field: 'command.env.N', rule: 'must be a string' },
  {
    what: 'bad env name',
    input: { ...base, command: { argv: ['true'], env: { '1N': 'x' } } },
    field: 'command.env.1N',
    rule: 'environment variable names must match',
  },
  {
    what: 'NUL in an env value (a process could not be started with it)',
    input: { ...base, command: { argv: ['true'], env: { A: 'x\0y' } } },
    field: 'command.env.A',
    rule: 'must be a string without NUL characters',
  },
  { what: 'null input', input: null, field: '(root)', rule: 'must be an object' },
  { what: 'string input', input: 'wordcount', field: '(root)', rule: 'must be an object' },
  { what: 'array input', input: [base], field: '(root)', rule: 'must be an object' },
];

describe('malformed job specs are rejected naming the field and rule', () => {
  it('has a broad table', () => {
    expect(bad.length).toBeGreaterThanOrEqual(20);
  });

  it.each(bad)('$what', ({ input, field, rule }) => {
    const err = rejection(input);
    expect(err.code).toBe('INVALID_ARGUMENT');
    expect(err.field).toBe(field);
    expect(err.message).toContain(`invalid job spec: ${field}: ${rule}`);
  });

  it('collects every problem of a spec into one message', () => {
    const err = rejection({ name: '', profile: 'nope', tasks: NaN, priority: 2.5, extra: true });
    const fields = (err.details?.issues as { field: string }[]).map((i) => i.field);
    expect(fields).toEqual(['name', 'profile', 'tasks', 'priority', 'extra', 'durationMs']);
    for (const f of fields) expect(err.message).toContain(`${f}: `);
    expect(err.message.split('\n')).toHaveLength(1);
  });

  it('names the source file when given', () => {
    try {
      parseJobSpec({ ...base, tasks: 0 }, catalog, { ...opts, source: 'jobs/wc.json' });
      expect.unreachable();
    } catch (e) {
      expect((e as Error).message).toBe('jobs/wc.json: invalid job spec: tasks: must be an integer in [1, 100000]');
    }
  });

  it('never reads a profile from disk: specs arrive over the network', () => {
    const err = rejection({ ...base, profile: `${catalog.dir}/workloads/memcached.json` });
    expect(err.field).toBe('profile');
  });
});

describe('valid job specs', () => {
  it('get defaults', () => {
    const job = parseJobSpec(base, catalog, opts);
    expect(job).toEqual({
      id: 'job-0001',
      name: 'wordcount-1',
      profile: catalog.workloads.get('spark-lr'),
      tasks: 20,
      priority: DEFAULT_PRIORITY,
      mode: 'incremental',
      locality: { mode: 'any', scope: 'server' },
      constraints: {},
      maxQueueMs: 30_000,
      durationMs: 100,
      submittedAt: opts.now,
    });
    expect(job.profile).toBe(catalog.workloads.get('spark-lr'));
    expect('command' in job).toBe(false);
  });

  it('fill a partial locality', () => {
    expect(parseJobSpec({ ...base, locality: { mode: 'spread' } }, catalog, opts).locality).toEqual({ mode: 'spread', scope: 'server' });
    expect(parseJobSpec({ ...base, locality: { scope: 'rack' } }, catalog, opts).locality).toEqual({ mode: 'any', scope: 'rack' });
  });

  it('keep every field given, at the bounds', () => {
    const input: JobSpecInput = {
      name: 'TPC-H_q9.stage-0',
      profile: 'tpch-scan',
      tasks: 100_000,
      priority: 999,
      mode: 'gang',
      locality: { mode: 'pack', scope: 'rack' },
      constraints: { platforms: ['r3-2xlarge', 'c3-8xlarge'], attributes: { zone: 'us-east-1a', ssd: 'true' }, dataServers: ['s0001', 's0007', 's0042'] },
      maxQueueMs: 0,
      durationMs: 7 * 86_400_000,
      command: { argv: ['sleep', '1'], env: { SPARK_HOME: '/opt/spark', EMPTY: '' } },
    };
    const snapshot = structuredClone(input);
    const job = parseJobSpec(input, catalog, opts);
    expect(job).toMatchObject({ ...input, profile: catalog.workloads.get('tpch-scan'), id: opts.id, submittedAt: opts.now });
    expect(input).toEqual(snapshot);
    // the job owns its arrays: mutating the input later cannot change it
    input.constraints?.platforms?.push('m3-large');
    expect(job.constraints.platforms).toEqual(['r3-2xlarge', 'c3-8xlarge']);
    expect(parseJobSpec({ ...base, priority: 0, tasks: 1 }, catalog, opts).priority).toBe(0);
  });

  it('accept a command without a duration', () => {
    const job = parseJobSpec({ name: 'ls', profile: 'spec-gcc', tasks: 1, command: { argv: ['ls', '-l', ''] } }, catalog, opts);
    expect(job.command).toEqual({ argv: ['ls', '-l', ''] });
    expect('durationMs' in job).toBe(false);
  });

  it('complete an inline profile from the catalog', () => {
    const job = parseJobSpec({ ...base, durationMs: 250, profile: { caused: vector, platformPerf: { 'x5650-6c': 0.5 } } }, catalog, opts);
    expect(job.profile.caused).toEqual(vector);
    expect(job.profile.name).toBe('wordcount-1');
    expect(job.profile.family).toBe('inline');
    expect(job.profile.latencyCritical).toBe(false);
    expect(job.profile.typicalDurationMs).toBe(250);
    expect(Object.keys(job.profile.platformPerf).sort()).toEqual([...catalog.platforms.keys()].sort());
    expect(job.profile.platformPerf['x5650-6c']).toBe(0.5);
    expect(job.profile.platformPerf['c3-2xlarge']).toBe(catalog.platforms.get('c3-2xlarge')?.speed);
  });

  it('keep a full inline profile as given', () => {
    const profile = {
      name: 'my-kv',
      description: 'in-house key-value store',
      family: 'kv',
      caused: vector,
      typicalDurationMs: 60_000,
      latencyCritical: true,
    };
    const job = parseJobSpec({ ...base, profile }, catalog, opts);
    expect(job.profile).toMatchObject(profile);
  });
});

describe('validateJobSpec without a catalog', () => {
  it('checks shape but cannot know names', () => {
    const r = validateJobSpec({ ...base, profile: 'anything', constraints: { platforms: ['c4-xlarge'] } });
    expect(r.ok).toBe(true);
    const bad = validateJobSpec({ ...base, tasks: 0 });
    expect(bad.ok).toBe(false);
    if (!bad.ok) expect(bad.issues).toEqual([{ field: 'tasks', rule: 'must be an integer in [1, 100000]' }]);
  });
});

describe('example jobs in profiles/jobs', () => {
  const dir = join(catalog.dir, 'jobs');
  const files = readdirSync(dir).filter((f) => f.endsWith('.json'));

  it('exist', () => {
    expect(files.length).toBeGreaterThanOrEqual(4);
  });

  it.each(files)('%s parses and fits the demo cluster', (f) => {
    const job = parseJobSpec(JSON.parse(readFileSync(join(dir, f), 'utf8')) as unknown, catalog, { ...opts, source: f });
    const demo = catalog.clusters.get('demo');
    if (!demo) throw new Error('no demo cluster');
    const servers = expandCluster(demo, catalog.platforms);
    const ids = new Set(servers.map((s) => s.id));
    for (const s of job.constraints.dataServers ?? []) expect(ids).toContain(s);
    expect(job.tasks).toBeLessThanOrEqual(servers.reduce((n, s) => n + s.rus, 0));
  });
});

describe('keys named like members of Object.prototype', () => {
  /** A spec as JSON text carries `__proto__` as an ordinary own key (JSON.parse defines it). */
  const fromJson = (extra: string): unknown => JSON.parse(`{"name":"j","profile":"spark-lr","tasks":2,"durationMs":100,${extra}}`);

  it("a constraint attribute '__proto__' is refused, not dropped", () => {
    const e = rejection(fromJson('"constraints":{"attributes":{"__proto__":"nowhere"}}'));
    expect(e.code).toBe('INVALID_ARGUMENT');
    expect(e.message).toContain("constraints.attributes: key '__proto__' is not allowed");
    // Alongside other attributes, and with another problem elsewhere: every problem is named.
    const both = rejection(fromJson('"priority":-1,"constraints":{"attributes":{"zone":"demo-a","__proto__":"x"}}'));
    expect(both.message).toContain("constraints.attributes: key '__proto__' is not allowed");
    expect(both.message).toContain('priority: must be an integer in [0, 999]');
  });

  it("an environment variable or an inline profile's platform named '__proto__' is refused", () => {
    expect(rejection(fromJson('"command":{"argv":["true"],"env":{"__proto__":"x","A":"1"}}')).message).toContain("command.env: key '__proto__' is not allowed");
    expect(rejection(fromJson(`"profile":{"caused":${JSON.stringify(vector)},"platformPerf":{"__proto__":2}}`)).message).toContain(
      "profile.platformPerf: key '__proto__' is not allowed",
    );
  });

  it('constructor and toString are ordinary attribute and variable names', () => {
    const job = parseJobSpec(
      fromJson('"constraints":{"attributes":{"constructor":"a","toString":"b"}},"command":{"argv":["true"],"env":{"constructor":"c"}}'),
      catalog,
      opts,
    );
    expect(Object.entries(job.constraints.attributes ?? {})).toEqual([
      ['constructor', 'a'],
      ['toString', 'b'],
    ]);
    expect(Object.entries(job.command?.env ?? {})).toEqual([['constructor', 'c']]);
    // Absent keys stay absent: nothing is inherited from Object.prototype.
    const plain = parseJobSpec(fromJson('"constraints":{"attributes":{"zone":"demo-a"}},"command":{"argv":["true"],"env":{"A":"1"}}'), catalog, opts);
    for (const k of ['constructor', 'toString', '__proto__']) {
      expect(plain.constraints.attributes?.[k]).toBeUndefined();
      expect(plain.command?.env?.[k]).toBeUndefined();
    }
  });

  it("an inline profile's omitted platforms take the platform speed, whatever the platform is named", () => {
    const job = parseJobSpec(fromJson(`"profile":{"caused":${JSON.stringify(vector)}}`), catalog, opts);
    for (const [name, p] of catalog.platforms) expect(job.profile.platformPerf[name]).toBe(p.speed);
    expect(job.profile.platformPerf['constructor']).toBeUndefined();
  });
});
