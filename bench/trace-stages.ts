/**
 * Where submit → running goes, step by step: reads the points that the processes of a run wrote
 * with TARCIL_TRACE_DIR set (src/util/trace.ts) and gives, for every task seen running, the time
 * between each step and the next, across the bench, the front-end that owned the job, etcd and
 * the hollow node.
 *
 *   TARCIL_TRACE_DIR=/tmp/trace npx tsx bench/soak.ts --quick --no-faults …
 *   npx tsx bench/trace-stages.ts --dir /tmp/trace [--from-s 30] [--name trace-stages]
 *
 * A job's steps are taken once (its first submission, evaluation and commit); a task's once (its
 * first placement reaching its node). Tasks whose steps are not all there (a job placed in several
 * commits, a task placed again) are left out and counted. Results: bench/results/trace-stages/<name>.{md,json}.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fmt, machine, mdTable, pct, resultsDir, writeResults } from './lib/report.ts';

function flag(name: string, dflt: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 && process.argv[i + 1] !== undefined ? (process.argv[i + 1] as string) : dflt;
}

/** The job's steps, in order, then the task's. */
const JOB_STEPS: [string, string][] = [
  ['bench.submitted', 'the bench sends SubmitJob'],
  ['submit.received', 'the front-end has the job (its gRPC handler, checks)'],
  ['submit.sent', 'the submission transaction built, sent to the store'],
  ['submit.answered', 'etcd answered the submission (job, owner key)'],
  ['evaluate', "the job's first evaluation starts (a later turn of the loop)"],
  ['schedule', 'an agent takes the tasks'],
  ['commit.asked', "admission, sample size, sampling, scoring, the group commit's turn: the commit asked for"],
  ['group.sent', "the agents' group commit sends it"],
  ['store.sent', "a slot under the process's limit on requests to etcd: the call starts"],
  ['store.answered', 'etcd answered the placement commit'],
  ['commit.answered', 'the agent has the answer'],
];
const TASK_STEPS: [string, string][] = [
  ['node.seen', 'the placement reaches the hollow node (watch of the RUs)'],
  ['node.asked', 'the node asks to record its task running'],
  ['group.sent', "the hollow process's group commit sends it"],
  ['store.sent', "a slot under the process's limit: the call starts"],
  ['store.answered', 'etcd answered the start write'],
  ['node.answered', 'the node has the answer (the task starts)'],
  ['bench.running', "the bench's watch delivers the running record"],
];

interface StageRow {
  from: string;
  to: string;
  what: string;
  n: number;
  p50: number;
  p90: number;
  p99: number;
  mean: number;
}

/** First time of each point, by job (`job`) and by task (`job#task`), from the trace lines. */
function firstPoints(text: Iterable<string>): Map<string, Map<string, number>> {
  const by = new Map<string, Map<string, number>>();
  for (const file of text) {
    for (const line of file.split('\n')) {
      const [t, point, id] = line.split(' ');
      if (t === undefined || point === undefined || id === undefined) continue;
      const at = Number(t);
      if (!Number.isFinite(at)) continue;
      let m = by.get(id);
      if (!m) by.set(id, (m = new Map<string, number>()));
      const had = m.get(point);
      if (had === undefined || at < had) m.set(point, at);
    }
  }
  return by;
}

/** Each step to the next over the tasks that have them all, submitted at or after `fromMs`. */
function stageRows(by: Map<string, Map<string, number>>, fromMs = -Infinity): { rows: StageRow[]; tasks: number; incomplete: number; total: number[] } {
  const steps = [...JOB_STEPS.map(([p, w]) => ({ p, w, task: false })), ...TASK_STEPS.map(([p, w]) => ({ p, w, task: true }))];
  const gaps: number[][] = steps.slice(1).map(() => []);
  const total: number[] = [];
  let incomplete = 0;
  for (const [id, points] of by) {
    const hash = id.indexOf('#');
    if (hash < 0) continue;
    const job = by.get(id.slice(0, hash));
    const times = steps.map((s) => (s.task ? points.get(s.p) : job?.get(s.p)));
    if (times.some((t) => t === undefined)) {
      incomplete++;
      continue;
    }
    const ts = times as number[];
    if ((ts[0] as number) < fromMs) continue;
    for (let i = 1; i < ts.length; i++) (gaps[i - 1] as number[]).push((ts[i] as number) - (ts[i - 1] as number));
    total.push((ts[ts.length - 1] as number) - (ts[0] as number));
  }
  const rows = steps.slice(1).map((s, i) => {
    const xs = gaps[i] as number[];
    const prev = steps[i] as { p: string };
    return {
      from: prev.p,
      to: s.p,
      what: s.w,
      n: xs.length,
      p50: pct(xs, 0.5),
      p90: pct(xs, 0.9),
      p99: pct(xs, 0.99),
      mean: xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : NaN,
    };
  });
  return { rows, tasks: total.length, incomplete, total };
}

function main(): void {
  const dir = flag('dir', '');
  if (!dir) throw new Error('--dir: the directory the run traced into (TARCIL_TRACE_DIR) is required');
  const name = flag('name', 'trace-stages');
  const fromS = Number(flag('from-s', '30'));
  const files = readdirSync(dir).filter((f) => f.endsWith('.trace'));
  if (files.length === 0) throw new Error(`--dir: no .trace files in ${dir}`);
  const by = firstPoints(files.map((f) => readFileSync(join(dir, f), 'utf8')));
  let first = Infinity;
  for (const m of by.values()) first = Math.min(first, m.get('bench.submitted') ?? Infinity);
  const { rows, tasks, incomplete, total } = stageRows(by, first + fromS * 1000);
  const command = `npx tsx bench/trace-stages.ts ${process.argv.slice(2).join(' ')}`;
  const md = [
    '# Trace: submit → running, step by step',
    '',
    `\`${command}\` on ${machine()}, ${new Date().toISOString().slice(0, 16)} UTC; ${files.length} processes' traces.`,
    `${tasks} tasks submitted from ${fromS} s on (${incomplete} left out: not all their steps traced); submit → running p50 ${fmt(pct(total, 0.5), 1)} ms, p99 ${fmt(pct(total, 0.99), 1)} ms.`,
    '',
    mdTable(
      ['from', 'to', 'what happens', 'p50 ms', 'p90 ms', 'p99 ms', 'mean ms'],
      rows.map((r) => [r.from, r.to, r.what, fmt(r.p50, 2), fmt(r.p90, 2), fmt(r.p99, 2), fmt(r.mean, 2)]),
    ),
    '',
    'A negative time means the step came before the one above it: a watch delivered the write to another process before the writer had its answer.',
  ].join('\n');
  for (const p of writeResults(
    name,
    { command, machine: machine(), fromS, tasks, incomplete, total: { p50: pct(total, 0.5), p99: pct(total, 0.99) }, rows },
    md,
    resultsDir(false, 'trace-stages'),
  ))
    console.error(`[trace-stages] wrote ${p}`);
  console.log(md);
}

main();
