/**
 * One case of `bench sim-speed`, run in a process of its own so that its peak RSS is its own:
 * `node --import tsx src/sim/speed/case.ts '<SpeedCase as JSON>'` prints one JSON line (CaseResult).
 */
import { runSim } from '../run.ts';
import { cell, w3, w4 } from '../workloads.ts';
import type { CaseResult, SpeedCase } from './types.ts';

function workload(c: SpeedCase): ReturnType<typeof w4> {
  const w = c.workload;
  if (w.kind === 'w4') return w4({ load: w.load, jobs: w.jobs, workers: w.workers });
  if (w.kind === 'w3') return w3({ jobs: w.jobs });
  return cell({ servers: w.servers, load: w.load, tasks: w.tasks });
}

const c = JSON.parse(process.argv[2] ?? '{}') as SpeedCase;
const wl = workload(c);
const memory: { t: number; rssMb: number; liveMb?: number }[] = [];
// With --expose-gc (as bench sim-speed starts a case): every 2 M events the live heap after a full
// collection, which tells what the run keeps from what the collector has not yet taken.
const gc = (globalThis as { gc?: () => void }).gc;
let progress = 0;
const sample = (t: number): void => {
  const m: { t: number; rssMb: number; liveMb?: number } = { t, rssMb: process.memoryUsage().rss / 2 ** 20 };
  if (gc && ++progress % 40 === 0) {
    gc();
    m.liveMb = process.memoryUsage().heapUsed / 2 ** 20;
  }
  memory.push(m);
};
const t0 = performance.now();
const r = runSim({ workload: wl, policy: { name: c.policy }, seed: c.seed, keepRecords: false, onProgress: sample });
const wallS = (performance.now() - t0) / 1000;
const decisions = r.counters.decisions ?? 0;
const tm = r.stats.timing ?? {};
const out: CaseResult = {
  name: c.name,
  policy: r.policy,
  workload: r.workload,
  servers: wl.servers.length,
  rus: r.nRu,
  wallS,
  events: r.stats.events,
  tasks: r.stats.tasks,
  simS: r.stats.simMs / 1000,
  peakRssMb: process.resourceUsage().maxRSS / 1024,
  memory,
  meanResponseMs: r.summary.response.mean,
  jobs: r.summary.jobs,
  decisions,
  decisionsPerS: decisions / wallS,
  decideUs: tm.decisions ? ((tm.decideMs ?? 0) * 1000) / tm.decisions : NaN,
  verdictUs: tm.verdicts ? ((tm.verdictMs ?? 0) * 1000) / tm.verdicts : NaN,
  candidateUs: tm.candidates ? ((tm.decideMs ?? 0) * 1000) / tm.candidates : NaN,
  candidatesPerDecision: tm.decisions ? (tm.candidates ?? 0) / tm.decisions : NaN,
  meanR: r.counters.meanR ?? NaN,
};
process.stdout.write(`${JSON.stringify(out)}\n`);
