/**
 * A production trace replayed in the simulator (src/sim/experiments/trace-run.ts, trace.ts) and
 * `tarcil bench trace`, on small traces generated here in both formats: every policy keeps each
 * pod's cores on one server and on its platforms, waits are what the tasks' starts say, jobs not
 * placed are counted, and a missing file flag is refused by name.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { benchCommand } from '../../src/cli/bench.ts';
import { loadCatalog } from '../../src/model/catalog.ts';
import { replayTrace, speedupFor, TRACE_POLICIES, waitStats, type ReplayOptions, type TracePolicy } from '../../src/sim/experiments/trace-run.ts';
import type { SimJob, World } from '../../src/sim/world.ts';
import { isTarcilError, type TarcilError } from '../../src/util/errors.ts';
import { parseTrace, type Trace, type TraceFormat } from '../../src/workload/trace.ts';

const PROFILES = [...loadCatalog().workloads.keys()];
const NODE_HEADER = 'sn,cpu_milli,memory_mib,gpu,model';
const POD_HEADER = 'name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time';
const QOS = ['LS', 'BE', 'Burstable', 'Guaranteed'];
const SIZES = [1, 2, 4, 8, 12, 16];

/** 112 cores: six CPU nodes of 8, two T4 nodes of 16, one V100M32 node of 32. */
const aliNodes = [
  NODE_HEADER,
  ...Array.from({ length: 6 }, (_, i) => `cpu-${i},8000,32768,0,`),
  'gpu-t4-0,16000,65536,2,T4',
  'gpu-t4-1,16000,65536,2,T4',
  'gpu-v100,32000,131072,8,V100M32',
].join('\n');

/** 80 pods arriving every 4 s for 20–420 s each: about twice the cores, so pods wait. Every 9th was never scheduled; one asks for a GPU model no node has. */
function aliPods(): string {
  const rows = [POD_HEADER];
  for (let i = 0; i < 80; i++) {
    const cores = SIZES[(i * 7) % SIZES.length] as number;
    const gpu = i % 3 === 0 ? 1 : 0;
    const spec = i % 5 === 0 ? 'T4' : '';
    const created = 4 * i;
    const run = 20 + ((i * 37) % 400);
    const scheduled = i % 9 === 4 ? '' : String(created + (i % 7));
    rows.push(
      `pod-${i},${cores * 1000 - (i % 2) * 500},1024,${gpu},${gpu ? 500 : 0},${spec},${QOS[i % QOS.length]},Running,${created},${(scheduled === '' ? created : Number(scheduled)) + run},${scheduled}`,
    );
  }
  rows.push(`pod-a100,4000,1024,1,1000,A100,LS,Pending,10,20,`);
  return rows.join('\n');
}

const genericNodes = ['server,cores,platform', 'small-0,4,slow', 'small-1,4,slow', 'big-0,12,fast', 'big-1,12,fast'].join('\n');
/** 40 jobs: one-server jobs of 2–6 cores and jobs of single-core tasks, some held to a platform. */
function genericJobs(): string {
  const rows = ['name,arrival_s,tasks,cores,duration_s,platforms,priority'];
  for (let i = 0; i < 40; i++) {
    const multi = i % 2 === 0;
    rows.push(
      `job-${i},${2 * i},${multi ? 1 : 3},${multi ? 2 + (i % 5) : 1},${10 + ((i * 13) % 60)},${i % 4 === 0 ? 'fast' : i % 4 === 1 ? 'slow' : ''},${100 + (i % 3) * 10}`,
    );
  }
  return rows.join('\n');
}

function parse(format: TraceFormat, nodes: string, pods: string): Trace {
  return parseTrace({ file: 'nodes.csv', text: nodes }, { file: 'pods.csv', text: pods }, { format, compress: 1, profiles: PROFILES, seed: 5 });
}

/** Replays with one policy and checks where every task ran against the job's requirements; returns the jobs and the run. */
function replayChecked(trace: Trace, policy: TracePolicy, o: Partial<ReplayOptions> = {}) {
  let kept: { jobs: SimJob[]; world: World } | undefined;
  const run = replayTrace(trace, policy, { seed: 3, ...o, keepJobs: (jobs, world) => (kept = { jobs, world }) });
  if (!kept) throw new Error('jobs not kept');
  const { jobs, world } = kept;
  expect(run.outcomes).toHaveLength(trace.jobs.length);
  trace.jobs.forEach((tj, k) => {
    const j = jobs[k] as SimJob;
    const out = run.outcomes[k];
    const started = j.tasks.filter((t) => !Number.isNaN(t.start));
    const servers = new Set(started.map((t) => world.server(t.ru).spec.id));
    // The trace's own requirement (a pod's cores together), not the simulated job's copy of it.
    if (tj.mode === 'gang' && tj.locality.mode === 'pack') expect(servers.size, `${tj.id} on ${[...servers].join(', ')}`).toBeLessThanOrEqual(1);
    for (const t of started) if (tj.platforms) expect(tj.platforms).toContain(world.server(t.ru).spec.platform);
    if (started.length === j.tasks.length) {
      const wait = Math.max(...started.map((t) => t.start)) - j.arrival;
      expect(wait).toBeGreaterThanOrEqual(0);
      expect(out?.waitS).toBeCloseTo(wait / 1000, 9);
    } else expect(out?.waitS).toBeUndefined();
  });
  for (const p of run.series) {
    expect(p.allocated).toBeGreaterThanOrEqual(0);
    expect(p.allocated + p.fragmented).toBeLessThanOrEqual(1 + 1e-9);
  }
  return { run, jobs };
}

describe('a trace replayed by every policy', () => {
  const ali = parse('alibaba', aliNodes, aliPods());

  it.each(TRACE_POLICIES)('%s keeps each pod on one server of its platforms, and its waits are its tasks’ starts', (policy) => {
    const { run } = replayChecked(ali, policy);
    expect(run.splitJobs).toBe(0);
    expect(run.platformViolations).toBe(0);
    // The trace offers about twice the cores: some pods wait, and all are placed in the end.
    const st = waitStats(run.outcomes);
    expect(st.never).toBe(0);
    expect(run.outcomes.some((o) => (o.waitS ?? 0) > 1)).toBe(true);
    expect(Math.max(...run.series.map((p) => p.allocated))).toBeGreaterThan(0.5);
    expect(run.quality.tasks).toBe(ali.jobs.reduce((a, j) => a + j.tasks, 0));
  });

  it('counts the jobs not placed when the replay stops, and the production scheduler’s wait apart', () => {
    const { run, jobs } = replayChecked(ali, 'centralized', { stopAtMs: 60_000 });
    const notPlaced = jobs.filter((j) => j.started < j.tasks.length).length;
    expect(notPlaced).toBeGreaterThan(0);
    expect(waitStats(run.outcomes).never).toBe(notPlaced);
    const prod = waitStats(run.outcomes, 'production');
    expect(prod.never).toBe(ali.jobs.filter((j) => j.neverScheduled).length);
    expect(prod.never).toBeGreaterThan(0);
    expect(prod.n + prod.never).toBe(ali.jobs.length);
    expect(prod.p99).toBe(6); // scheduled − creation is i mod 7 for pod i
  });

  it('a sped-up replay offers the load asked for, its pods arriving faster with their run times kept', () => {
    const f = speedupFor(ali, 0.5);
    expect(f).toBe(1); // already above half the cores
    const sparse = parse('alibaba', aliNodes.replace(/,8000,/g, ',800000,'), aliPods());
    const g = speedupFor(sparse, 0.5);
    expect(g).toBeGreaterThan(1);
    const slow = replayChecked(sparse, 'tarcil');
    const fast = replayChecked(sparse, 'tarcil', { speedup: g });
    const first = Math.min(...sparse.jobs.map((j) => j.arrivalMs));
    sparse.jobs.forEach((tj, k) => {
      const j = fast.jobs[k] as SimJob;
      expect(j.arrival - first).toBeCloseTo((tj.arrivalMs - first) / g, 6);
      for (const t of j.tasks) expect(t.work).toBe(tj.durationMs);
    });
    const peak = (r: typeof slow): number => Math.max(...r.run.series.map((p) => p.allocated));
    expect(peak(fast)).toBeGreaterThan(peak(slow));
    expect(replayChecked(sparse, 'tarcil', { speedup: g }).run.outcomes).toEqual(fast.run.outcomes); // seeded: the same replay twice
  });

  it.each(['tarcil', 'centralized', 'sparrow'] as const)(
    '%s replays the generic format: one-server jobs together, single-core tasks anywhere on their platforms',
    (policy) => {
      const gen = parse('generic', genericNodes, genericJobs());
      const { run, jobs } = replayChecked(gen, policy);
      expect(jobs.filter((j) => j.oneServer)).toHaveLength(20);
      expect(waitStats(run.outcomes).never).toBe(0);
      expect(waitStats(run.outcomes, 'production').n).toBe(0);
    },
  );
});

describe('tarcil bench trace', () => {
  const dir = mkdtempSync(join(tmpdir(), 'tarcil-bench-trace-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  const nodes = join(dir, 'nodes.csv');
  const pods = join(dir, 'pods.csv');
  writeFileSync(nodes, aliNodes);
  writeFileSync(pods, aliPods());
  const quiet = { quick: true, seed: 2, workers: 1, write: () => undefined, progress: () => undefined };

  it('--quick writes the figures of tarcil and centralized beside production’s, and lists the unmappable pod with its reason', async () => {
    const out = join(dir, 'out');
    const res = await benchCommand('trace', { ...quiet, out, trace: { nodes, pods, format: 'alibaba', compress: 1 } });
    expect(res.name).toBe('trace-alibaba-2023');
    for (const f of ['trace-alibaba-2023.json', 'trace-alibaba-2023.csv', 'trace-alibaba-2023.md', 'trace-allocation-recorded.svg', 'trace-wait-sped-up.svg'])
      expect(existsSync(join(out, f)), f).toBe(true);
    const policies = new Set(res.rows.map((r) => r.policy));
    expect([...policies].sort()).toEqual(['centralized', 'production', 'tarcil']);
    for (const r of res.rows) expect(r.p50WaitS === undefined || (r.p50WaitS as number) >= 0 || Number.isNaN(r.p50WaitS)).toBe(true);
    const unmapped = res.tables.find((t) => t.title.startsWith('Pods not mapped'));
    expect(unmapped?.rows).toEqual([['pod-a100', 82, 'no node is of the platforms it allows (A100)']]);
    expect(readFileSync(join(out, 'trace-alibaba-2023.md'), 'utf8')).toContain('tarcil bench trace --nodes nodes.csv --pods pods.csv --quick --seed 2');
  });

  async function refusal(name: string, trace: Record<string, unknown>): Promise<TarcilError> {
    try {
      await benchCommand(name, { ...quiet, out: join(dir, 'refused'), trace: { format: 'alibaba', compress: 1, ...trace } });
    } catch (e) {
      expect(isTarcilError(e, 'INVALID_ARGUMENT')).toBe(true);
      return e as TarcilError;
    }
    throw new Error('not refused');
  }

  it('refuses a missing --nodes or --pods by name, and a trace given to another experiment', async () => {
    const noNodes = await refusal('trace', { pods });
    expect(noNodes.message).toContain('--nodes');
    expect(noNodes.field).toBe('--nodes');
    const noPods = await refusal('trace', { nodes });
    expect(noPods.message).toContain('--pods');
    expect(noPods.field).toBe('--pods');
    const other = await refusal('sample-size', { nodes, pods });
    expect(other.message).toContain('--nodes: only bench trace reads a trace');
    expect(existsSync(join(dir, 'refused'))).toBe(false);
  });
});
