/**
 * `tarcil trace inspect`: loads a trace (src/workload/trace.ts), maps it and prints what it became:
 * servers by platform, jobs by QoS class and by size, the pods never scheduled in production and
 * the rows that could not be mapped, with the reason.
 */
import { loadCatalog } from '../model/catalog.ts';
import { loadTrace, type Trace, type TraceFormat } from '../workload/trace.ts';

export interface TraceInspectOptions {
  nodes: string;
  pods: string;
  format: TraceFormat;
  compress: number;
  seed: number;
}

/** Size classes of the summary, in tasks (= cores). */
const SIZES: readonly [string, number][] = [
  ['1', 1],
  ['2-4', 4],
  ['5-8', 8],
  ['9-16', 16],
  ['17-32', 32],
  ['33+', Infinity],
];
/** Unmappable rows printed one by one; the rest are counted. */
const SHOWN_UNMAPPABLE = 20;

const pad = (s: string | number, n: number): string => String(s).padEnd(n);

/** The summary's lines. */
export function traceSummary(t: Trace): string[] {
  const out: string[] = [];
  const byPlatform = new Map<string, { servers: number; rus: number }>();
  for (const s of t.servers) {
    const e = byPlatform.get(s.platform) ?? { servers: 0, rus: 0 };
    e.servers++;
    e.rus += s.rus;
    byPlatform.set(s.platform, e);
  }
  const rus = t.servers.reduce((a, s) => a + s.rus, 0);
  out.push(`servers: ${t.servers.length}, ${rus} RUs (one per core)`);
  out.push(`  ${pad('PLATFORM', 12)}${pad('SERVERS', 9)}RUS`);
  for (const [p, e] of [...byPlatform].sort((a, b) => a[0].localeCompare(b[0]))) out.push(`  ${pad(p, 12)}${pad(e.servers, 9)}${e.rus}`);
  const tasks = t.jobs.reduce((a, j) => a + j.tasks, 0);
  out.push(`jobs: ${t.jobs.length}, ${tasks} tasks (times compressed ${t.compress}x)`);
  const byQos = new Map<string, { jobs: number; tasks: number; priority: number }>();
  for (const j of t.jobs) {
    const e = byQos.get(j.qos) ?? { jobs: 0, tasks: 0, priority: j.priority };
    e.jobs++;
    e.tasks += j.tasks;
    byQos.set(j.qos, e);
  }
  out.push(`  ${pad('QOS', 12)}${pad('PRIORITY', 10)}${pad('JOBS', 8)}TASKS`);
  for (const [q, e] of [...byQos].sort((a, b) => b[1].priority - a[1].priority || a[0].localeCompare(b[0])))
    out.push(`  ${pad(q, 12)}${pad(t.format === 'alibaba' ? e.priority : '-', 10)}${pad(e.jobs, 8)}${e.tasks}`);
  out.push(`  ${pad('TASKS', 12)}JOBS`);
  let lo = 0;
  for (const [label, hi] of SIZES) {
    const n = t.jobs.filter((j) => j.tasks > lo && j.tasks <= hi).length;
    if (n > 0) out.push(`  ${pad(label, 12)}${n}`);
    lo = hi;
  }
  out.push(`never scheduled in production: ${t.jobs.filter((j) => j.neverScheduled).length} (replayed, counted apart)`);
  out.push(`unmappable: ${t.unmappable.length}`);
  for (const u of t.unmappable.slice(0, SHOWN_UNMAPPABLE)) out.push(`  line ${u.line} ${u.id}: ${u.reason}`);
  if (t.unmappable.length > SHOWN_UNMAPPABLE) out.push(`  … and ${t.unmappable.length - SHOWN_UNMAPPABLE} more`);
  return out;
}

export function traceInspectCommand(o: TraceInspectOptions, print: (line: string) => void): void {
  const profiles = [...loadCatalog().workloads.keys()];
  const trace = loadTrace(o.nodes, o.pods, { format: o.format, compress: o.compress, profiles, seed: o.seed });
  for (const l of traceSummary(trace)) print(l);
}
