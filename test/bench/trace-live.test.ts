/**
 * The live replay of a trace (bench/trace-live.ts) end to end at small scale: a tiny generated
 * trace in each format, its hollow cell on the tests' etcd with three front-ends, the soak's
 * auditor; every acknowledged job ends, nothing is flagged, and the figures hold together.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { busiestWindow, runTraceLive, type TraceLiveResult } from '../../bench/lib/trace-live-run.ts';
import { loadCatalog } from '../../src/model/catalog.ts';
import { loadTrace, type TraceFormat } from '../../src/workload/trace.ts';

const dir = mkdtempSync(join(tmpdir(), 'tarcil-trace-live-test-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const ALIBABA_NODES = ['sn,cpu_milli,memory_mib,gpu,model', 'n0,8000,1024,0,', 'n1,8000,1024,0,', 'n2,16000,1024,2,T4', 'n3,12000,1024,1,P100'];
// Pods over 40 trace seconds, 2–8 cores, every QoS class, one held to T4, one asking a GPU, one
// production never scheduled; a far earlier pod outside the busiest 60 s.
const ALIBABA_PODS = [
  'name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time',
  'early,1000,1,0,0,,BE,Succeeded,0,10,0',
  'p1,4000,1,0,0,,LS,Succeeded,1000,1020,1001',
  'p2,2000,1,0,0,,BE,Succeeded,1005,1030,1005',
  'p3,8000,1,1,1000,T4,Guaranteed,Running,1010,1025,1012',
  'p4,3000,1,1,500,,Burstable,Succeeded,1020,1040,1020',
  'p5,6000,1,0,0,,BE,Failed,1030,1045,',
  'p6,2500,1,0,0,,LS,Succeeded,1040,1050,1041',
];
const GENERIC_NODES = ['server,cores,platform', 'a,8,slow', 'b,8,slow', 'c,16,fast'];
const GENERIC_JOBS = [
  'name,arrival_s,tasks,cores,duration_s,platforms,priority',
  'g1,0,3,,15,,',
  'g2,5,1,4,10,fast,120',
  'g3,10,2,2,20,slow|fast,80',
  'g4,20,1,6,10,,',
];

async function run(format: TraceFormat, nodes: string[], pods: string[], windowS: number): Promise<TraceLiveResult> {
  const n = join(dir, `${format}-nodes.csv`);
  const p = join(dir, `${format}-pods.csv`);
  writeFileSync(n, `${nodes.join('\n')}\n`);
  writeFileSync(p, `${pods.join('\n')}\n`);
  const trace = loadTrace(n, p, { format, compress: 10, profiles: [...loadCatalog().workloads.keys()], seed: 1 });
  return runTraceLive({
    trace,
    windowS,
    seed: 1,
    frontEnds: 3,
    agents: 1,
    etcdEndpoint: inject('etcdEndpoint'),
    sampleMs: 250,
    drainMarginMs: 20_000,
    say: () => undefined,
  });
}

function consistent(r: TraceLiveResult, pods: number): void {
  expect(r.window.pods).toBe(pods);
  expect(r.jobs).toHaveLength(pods);
  expect(r.audit.acked).toBe(pods);
  expect(r.audit.failedSubmissions).toBe(0);
  expect(r.audit.notFinal).toEqual([]);
  expect(r.audit.violations).toEqual([]);
  expect(r.cell.registeredRus).toBe(r.cell.rus);
  for (const j of r.jobs) {
    // Every pod fits an empty cell: all placed, live and in the simulator, waits ≥ 0.
    expect(j.liveWaitMs, j.id).toBeGreaterThanOrEqual(0);
    expect(j.liveWaitS).toBeCloseTo((j.liveWaitMs as number) * (r.window.compress / 1000), 9);
    expect(j.simWaitS, j.id).toBeGreaterThanOrEqual(0);
    expect(j.servers).toBeGreaterThanOrEqual(1);
    expect(j.servers).toBeLessThanOrEqual(j.tasks);
  }
  expect(r.allocation.live.length).toBeGreaterThan(0);
  for (const a of [...r.allocation.live, ...r.allocation.sim]) expect(a.allocated).toBeGreaterThanOrEqual(0);
  expect(Math.max(...r.allocation.live.map((a) => a.allocated))).toBeGreaterThan(0);
  expect(r.sim.platformViolations).toBe(0);
  // From the task and RU records: every task seen, each pod on one server of its platforms.
  expect(r.placements.tasksSeen).toBe(r.jobs.reduce((a, j) => a + j.tasks, 0));
  expect(r.placements.splitPods).toBe(0);
  expect(r.placements.offPlatformTasks).toBe(0);
  expect(r.placements.unknownServerTasks).toBe(0);
}

describe('live trace replay', () => {
  it('picks the busiest window by cores asked', () => {
    const jobs = [0, 1, 2, 50, 51].map((s, i) => ({ id: `j${i}`, arrivalMs: s * 1000, tasks: i === 3 ? 10 : 1 })) as unknown as Parameters<
      typeof busiestWindow
    >[0];
    expect(busiestWindow(jobs, 2000).jobs.map((j) => j.id)).toEqual(['j3', 'j4']);
    expect(busiestWindow(jobs, 2000).cores).toBe(11);
    expect(busiestWindow(jobs, 100_000).jobs).toHaveLength(5);
  });

  it("replays the Alibaba format's busiest stretch on a hollow cell: every job final, no violation, waits ≥ 0", async () => {
    const r = await run('alibaba', ALIBABA_NODES, ALIBABA_PODS, 60);
    consistent(r, 6);
    expect(r.jobs.find((j) => j.id === 'p5')?.neverScheduled).toBe(true);
    expect(r.jobs.find((j) => j.id === 'p1')?.productionWaitS).toBeCloseTo(1, 9);
    expect(r.cell.platforms).toBe(3);
  }, 90_000);

  it('replays the generic format', async () => {
    const r = await run('generic', GENERIC_NODES, GENERIC_JOBS, 100);
    consistent(r, 4);
  }, 90_000);
});
