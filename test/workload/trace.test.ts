/**
 * The trace loader and its mapping (src/workload/trace.ts), on small files generated here in the
 * Alibaba GPU v2023 format and in the generic format.
 */
import { describe, expect, it } from 'vitest';
import { fnv1a, parseTrace, profileFor, QOS_PRIORITY, type TraceOptions } from '../../src/workload/trace.ts';
import { isTarcilError, TarcilError } from '../../src/util/errors.ts';
import { readCsv, type RowProblem } from '../../src/workload/csv.ts';

const NODE_HEADER = 'sn,cpu_milli,memory_mib,gpu,model';
const POD_HEADER = 'name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time';
const PROFILES = ['spark-lr', 'memcached', 'spec-mcf'];
const ALI: TraceOptions = { format: 'alibaba', compress: 1, profiles: PROFILES, seed: 7 };

const nodes = [NODE_HEADER, 'n-cpu,96000,393216,0,', 'n-t4,64000,262144,2,T4', 'n-v100,96500,786432,8,V100M32'].join('\n');
const pod = (name: string, milli: number, gpus: number, spec: string, qos: string, created: number, deleted: number, scheduled: string): string =>
  `${name},${milli},1024,${gpus},${gpus > 0 ? 1000 : 0},${spec},${qos},Running,${created},${deleted},${scheduled}`;
const pods = [
  POD_HEADER,
  pod('p-ls', 4000, 0, '', 'LS', 100, 700, '102'),
  pod('p-be', 2500, 1, '', 'BE', 200, 1200, '300'),
  pod('p-burst', 12000, 0, '', 'Burstable', 300, 400, '300'),
  pod('p-guar', 8000, 1, 'V100M32|T4', 'Guaranteed', 400, 1400, '410'),
  pod('p-pending', 1000, 0, '', 'BE', 500, 900, ''),
  pod('p-toobig', 97000, 0, '', 'LS', 600, 700, '600'),
  pod('p-nomodel', 2000, 1, 'A100', 'LS', 700, 800, '700'),
  pod('p-gpus', 2000, 4, 'T4', 'LS', 800, 900, '800'),
].join('\n');

function load(n: string, p: string, o: TraceOptions = ALI) {
  return parseTrace({ file: 'nodes.csv', text: n }, { file: 'pods.csv', text: p }, o);
}

function problemsOf(f: () => unknown): string {
  try {
    f();
  } catch (e) {
    expect(isTarcilError(e, 'INVALID_ARGUMENT')).toBe(true);
    return (e as TarcilError).message;
  }
  throw new Error('expected the trace to be refused');
}

describe('the Alibaba format and the mapping', () => {
  const t = load(nodes, pods);
  const job = (id: string) => {
    const j = t.jobs.find((x) => x.id === id);
    if (!j) throw new Error(`no job ${id}`);
    return j;
  };

  it('a node is a server of its whole cores on the platform of its GPU model, or cpu', () => {
    expect(t.servers).toEqual([
      { id: 'n-cpu', platform: 'cpu', rus: 96, gpus: 0 },
      { id: 'n-t4', platform: 'T4', rus: 64, gpus: 2 },
      { id: 'n-v100', platform: 'V100M32', rus: 96, gpus: 8 },
    ]);
  });

  it('a pod of c cores is a gang of c tasks packed on a server; fractions of a core round up', () => {
    expect(job('p-ls')).toMatchObject({ tasks: 4, mode: 'gang', locality: { mode: 'pack', scope: 'server' } });
    expect(job('p-be').tasks).toBe(3);
    expect(job('p-burst').tasks).toBe(12);
  });

  it('priority follows QoS: LS and Guaranteed above Burstable above BE', () => {
    expect(job('p-ls').priority).toBe(job('p-guar').priority);
    expect(job('p-guar').priority).toBeGreaterThan(job('p-burst').priority);
    expect(job('p-burst').priority).toBeGreaterThan(job('p-be').priority);
    expect(job('p-burst').priority).toBe(QOS_PRIORITY.Burstable);
  });

  it('platforms: those gpu_spec allows; every GPU platform for a GPU pod without one; any for a CPU pod', () => {
    expect(job('p-guar').platforms).toEqual(['V100M32', 'T4']);
    expect(job('p-be').platforms).toEqual(['T4', 'V100M32']);
    expect(job('p-ls').platforms).toBeUndefined();
  });

  it('arrival = creation, duration = deletion − scheduled (− creation if never scheduled), the wait kept', () => {
    expect(job('p-ls')).toMatchObject({ arrivalMs: 100_000, durationMs: 598_000, productionWaitMs: 2000, neverScheduled: false });
    expect(job('p-pending')).toMatchObject({ arrivalMs: 500_000, durationMs: 400_000, neverScheduled: true });
    expect(job('p-pending').productionWaitMs).toBeUndefined();
    // a pod deleted as it was scheduled still runs 1 ms
    expect(load(nodes, [POD_HEADER, pod('z', 1000, 0, '', 'LS', 5, 9, '9')].join('\n')).jobs[0]?.durationMs).toBe(1);
  });

  it('compression divides arrivals, durations and waits alike', () => {
    const c = load(nodes, pods, { ...ALI, compress: 100 });
    const j = c.jobs.find((x) => x.id === 'p-ls');
    expect(j).toMatchObject({ arrivalMs: 1000, durationMs: 5980, productionWaitMs: 20 });
  });

  it('pods no server can hold are listed with the reason, not loaded', () => {
    expect(t.jobs.map((j) => j.id).sort()).toEqual(['p-be', 'p-burst', 'p-guar', 'p-ls', 'p-pending']);
    const why = Object.fromEntries(t.unmappable.map((u) => [u.id, `${u.line}: ${u.reason}`]));
    expect(why['p-toobig']).toBe('7: no node has 97 cores');
    expect(why['p-nomodel']).toBe('8: no node is of the platforms it allows (A100)');
    expect(why['p-gpus']).toBe('9: no node of platform T4 has 2 cores and 4 GPUs');
  });

  it('profiles: the sorted catalog entry at FNV-1a(seed/id), whatever the rows order or the list order', () => {
    const sorted = [...PROFILES].sort();
    for (const j of t.jobs) expect(j.profile).toBe(sorted[fnv1a(`7/${j.id}`) % 3]);
    expect(fnv1a('')).toBe(0x811c9dc5);
    expect(fnv1a('a')).toBe(0xe40c292c);
    const reversed = load(nodes, [POD_HEADER, ...pods.split('\n').slice(1).reverse()].join('\n'), { ...ALI, profiles: [...PROFILES].reverse() });
    for (const j of reversed.jobs) expect(j.profile).toBe(profileFor(j.id, 7, sorted));
    const seeds = new Set(Array.from({ length: 20 }, (_, s) => profileFor('p-ls', s, sorted)));
    expect(seeds.size).toBeGreaterThan(1);
  });
});

describe('invalid rows: file, line, column and rule; nothing loaded', () => {
  it.each([
    ['cpu_milli', pod('a', 1000, 0, '', 'LS', 1, 2, '1').replace(',1000,', ',-5,'), 'pods.csv:2: column cpu_milli: must be a whole number'],
    ['qos', pod('a', 1000, 0, '', 'Gold', 1, 2, '1'), 'pods.csv:2: column qos: must be one of LS, Guaranteed, Burstable, BE'],
    ['scheduled_time', pod('a', 1000, 0, '', 'LS', 10, 20, '5'), 'pods.csv:2: column scheduled_time: must not be before creation_time (10)'],
    ['deletion_time', pod('a', 1000, 0, '', 'LS', 10, 20, '30'), 'pods.csv:2: column deletion_time: must not be before scheduled_time (30)'],
    ['gpu_spec', pod('a', 1000, 1, 'T4||', 'LS', 1, 2, '1'), "pods.csv:2: column gpu_spec: must be platform names separated by '|'"],
    ['name', pod('a b', 1000, 0, '', 'LS', 1, 2, '1'), 'pods.csv:2: column name: must be 1–64 letters'],
    ['(row)', 'a,1000,1', 'pods.csv:2: column (row): must have 11 fields like the header, has 3'],
  ])('%s', (_col, row, expected) => {
    expect(problemsOf(() => load(nodes, [POD_HEADER, row].join('\n')))).toContain(expected);
  });

  it('every problem is listed, on its own line, with the line it is on', () => {
    const bad = [POD_HEADER, pod('a', 1000, 0, '', 'LS', 1, 2, '1'), pod('a', 1000, 0, '', 'XX', 1, 2, '1'), pod('c', 1000, 0, '', 'LS', 1, 2, 'x')].join('\n');
    const m = problemsOf(() => load(nodes, bad));
    expect(m).toContain('3 invalid entries; nothing was loaded');
    expect(m).toContain('pods.csv:3: column name: must be unique: "a" is on line 2 too');
    expect(m).toContain('pods.csv:3: column qos:');
    expect(m).toContain('pods.csv:4: column scheduled_time:');
  });

  it('the list is capped, the rest counted', () => {
    const bad = [POD_HEADER, ...Array.from({ length: 60 }, (_, i) => pod(`p${i}`, 1000, 0, '', 'XX', 1, 2, '1'))].join('\n');
    const m = problemsOf(() => load(nodes, bad));
    expect(m).toContain('the trace has 60 invalid entries');
    expect(m).toContain('… and 10 more problems');
    expect(m.split('\n').filter((l) => l.startsWith('pods.csv:'))).toHaveLength(50);
  });

  it('nodes: a GPU node needs its model, a CPU node has none, a node at least one core', () => {
    const m = problemsOf(() => load([NODE_HEADER, 'a,8000,1,2,', 'b,8000,1,0,T4', 'c,500,1,0,'].join('\n'), pods));
    expect(m).toContain('nodes.csv:2: column model: must name the GPU model of a node with GPUs');
    expect(m).toContain('nodes.csv:3: column model: must be empty for a node without GPUs');
    expect(m).toContain('nodes.csv:4: column cpu_milli: must be a whole number in [1000,');
  });

  it('headers: a missing or unknown column; quoting', () => {
    expect(problemsOf(() => load('sn,cpu_milli,gpu,model,extra\nn,1000,0,,1', pods))).toMatch(
      /nodes\.csv:1: column extra: is not a column[^]*nodes\.csv:1: column memory_mib: is a required column missing/,
    );
    expect(problemsOf(() => load(nodes, `${POD_HEADER}\n"a,1000`))).toContain(
      'pods.csv:2: column (row): does not parse as CSV: the parsing is finished with an opening quote at line 2',
    );
    const quoted = load(nodes, `${POD_HEADER}\r\n"q1",1000,1,0,0,"",LS,Running,1,2,1\r\n`);
    expect(quoted.jobs.map((j) => j.id)).toEqual(['q1']);
  });
});

describe('the generic format', () => {
  const GEN: TraceOptions = { format: 'generic', compress: 10, profiles: PROFILES, seed: 1 };
  const gnodes = 'server,cores,platform\ns1,16,fast\ns2,8,slow\n';
  const jobs = [
    'name,arrival_s,tasks,cores,duration_s,command,platforms,priority',
    'web,0,10,,30,,,',
    'batch,2.5,2,4,,sleep 1,slow|fast,300',
    'huge,3,1,32,5,,,',
    'lost,4,1,,5,,gpu,',
  ].join('\n');

  it('maps each row: tasks × cores tasks, packed when a task has several cores, times compressed', () => {
    const t = load(gnodes, jobs, GEN);
    expect(t.servers).toEqual([
      { id: 's1', platform: 'fast', rus: 16, gpus: 0 },
      { id: 's2', platform: 'slow', rus: 8, gpus: 0 },
    ]);
    expect(t.jobs).toHaveLength(2);
    expect(t.jobs[0]).toMatchObject({ id: 'web', tasks: 10, mode: 'incremental', locality: { mode: 'any' }, arrivalMs: 0, durationMs: 3000, priority: 100 });
    expect(t.jobs[1]).toMatchObject({
      id: 'batch',
      tasks: 8,
      mode: 'gang',
      locality: { mode: 'pack' },
      arrivalMs: 250,
      command: { argv: ['sleep', '1'] },
      platforms: ['slow', 'fast'],
      priority: 300,
    });
    expect(t.unmappable).toEqual([
      { id: 'huge', line: 4, reason: 'no node has 32 cores' },
      { id: 'lost', line: 5, reason: 'no node is of the platforms it allows (gpu)' },
    ]);
  });

  it('only arrival_s and tasks are required columns; a job has a duration or a command, not both', () => {
    expect(load(gnodes, 'arrival_s,tasks,duration_s\n1,2,3', GEN).jobs[0]).toMatchObject({ id: 'job-2', tasks: 2, durationMs: 300 });
    expect(problemsOf(() => load(gnodes, 'arrival_s,tasks,duration_s,command\n1,2,3,true', GEN))).toContain(
      'pods.csv:2: column command: exactly one of duration_s and command must be given',
    );
    expect(problemsOf(() => load(gnodes, 'arrival_s,tasks,duration_s\n1,2,', GEN))).toContain(
      'pods.csv:2: column duration_s: exactly one of duration_s and command must be given',
    );
    expect(problemsOf(() => load(gnodes, 'arrival_s,tasks,duration_s,priority\n-1,0,3,1000', GEN))).toMatch(
      /column arrival_s: must be a non-negative number[^]*column tasks: must be a whole number in \[1,[^]*column priority: must be a whole number in \[0, 999\]/,
    );
    expect(problemsOf(() => load(gnodes, 'tasks,duration_s\n1,2', GEN))).toContain(
      'pods.csv:1: column arrival_s: is a required column missing from the header',
    );
    expect(problemsOf(() => load('server,cores,platform\ns1,0,fast', 'arrival_s,tasks,duration_s\n1,2,3', GEN))).toContain(
      'nodes.csv:2: column cores: must be a whole number in [1,',
    );
  });

  it('refuses a compression below 1', () => {
    expect(() => load(gnodes, jobs, { ...GEN, compress: 0.5 })).toThrow(/compress: must be a number ≥ 1/);
  });
});

describe('readCsv', () => {
  it('numbers each row by the line it starts on, past empty lines and line breaks inside quotes', () => {
    const problems: RowProblem[] = [];
    const t = readCsv('a,b\n1,"x\ny"\n\n3,4\n5,6,7\n', 'f.csv', ['a', 'b'], [], problems);
    expect(t.rows.map((r) => [r.line, r.cells['a'], r.cells['b']])).toEqual([
      [2, '1', 'x\ny'],
      [5, '3', '4'],
    ]);
    expect(problems).toEqual([{ file: 'f.csv', line: 6, column: '(row)', rule: 'must have 2 fields like the header, has 3' }]);
  });
});
