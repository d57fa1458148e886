/**
 * The frozen-node nemesis, long run: the fault cell of test/fault (a 3-member etcd, two front-ends,
 * four `tarcil monitor --executor process` nodes of 4 RUs, tasks that append start and end lines
 * to a file outside etcd) with a short lease and grace, one seed after another. Each seed freezes
 * a monitor (SIGSTOP) for twice its lease TTL + grace, then injects one more fault in turn: a
 * monitor frozen for less than, or about, its lease + grace, a front-end stopped past its lease,
 * a monitor SIGKILLed with its tasks' supervisors (not the tasks), a front-end SIGKILLed in the
 * middle of a quorum loss and started again (each submission keeps to one front-end and is retried
 * by its deadline, as `tarcil submit` does; one not taken 5 s after the repair is a violation,
 * `submission-lost`). Overlapping runs of a task and
 * runs of a task after one that succeeded are counted from the tasks' own execution records.
 * Writes bench/results/nemesis/nemesis-summary.json after every seed (seeds, faults, overlaps,
 * successReruns, the commit) and nemesis.md beside it.
 *
 * The second fault of seed n is the ((n − 1) mod 5)-th of that list, so any seed can be run alone.
 *
 * Run: npx tsx bench/nemesis.ts [--seeds 20] [--first-seed 1] [--ttl 3] [--grace-ms 3000] [--commit SHA] [--out DIR]
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { summarize } from '../test/support/fault-checker.ts';
import type { FaultKind } from '../test/support/nemesis.ts';
import { runScenario, type ScenarioResult } from '../test/fault/run.ts';
import { machine, resultsDir } from './lib/report.ts';

function arg(name: string): string | undefined {
  const i = process.argv.indexOf(name);
  return i >= 0 ? process.argv[i + 1] : undefined;
}
const seeds = Number(arg('--seeds') ?? 20);
const firstSeed = Number(arg('--first-seed') ?? 1);
const ttlS = Number(arg('--ttl') ?? 3);
const graceMs = Number(arg('--grace-ms') ?? 3000);
if (!Number.isInteger(seeds) || seeds < 1) throw new Error(`--seeds must be a positive integer, not ${arg('--seeds')}`);
if (!Number.isInteger(ttlS) || ttlS < 1) throw new Error(`--ttl must be a positive integer of seconds, not ${arg('--ttl')}`);
if (!Number.isFinite(graceMs) || graceMs < 0) throw new Error(`--grace-ms must be a number of ms ≥ 0, not ${arg('--grace-ms')}`);

/** The second fault of each seed, in turn. */
const SECOND: FaultKind[] = ['monitor-freeze-short', 'monitor-freeze-edge', 'fe-stop', 'monitor-supervisor-kill', 'quorum-loss-fe-kill'];

function commit(): string {
  const given = arg('--commit');
  if (given) return given;
  const head = spawnSync('git', ['rev-parse', 'HEAD'], { encoding: 'utf8' });
  if (head.status !== 0) return 'unknown';
  const dirty = spawnSync('git', ['status', '--porcelain', 'src'], { encoding: 'utf8' }).stdout.trim() !== '';
  return `${head.stdout.trim()}${dirty ? ' (with uncommitted changes under src/)' : ''}`;
}

process.on('SIGINT', () => process.exit(130));
process.on('SIGTERM', () => process.exit(143));

const dir = arg('--out') ?? join(resultsDir(false), 'nemesis');
mkdirSync(dir, { recursive: true });
const measured = commit();
const started = new Date().toISOString();
const say = (l: string): void => void process.stdout.write(`${new Date().toISOString().slice(11, 19)} ${l}\n`);
const results: ScenarioResult[] = [];

function write(): void {
  const overlaps = results.reduce((n, r) => n + r.report.violations.filter((v) => v.kind === 'runs-overlap').length, 0);
  const successReruns = results.reduce((n, r) => n + r.report.totals.rerunsAfterSuccess, 0);
  const faults = [...new Set(results.flatMap((r) => r.faults.map((f) => f.kind)))];
  const perFault: Record<string, { count: number; reruns: number; rerunsAfterSuccess: number; durationMs: number[] }> = {};
  for (const r of results) {
    for (const f of r.report.faults) {
      const p = (perFault[f.kind] ??= { count: 0, reruns: 0, rerunsAfterSuccess: 0, durationMs: [] });
      p.count++;
      p.reruns += f.reruns;
      p.rerunsAfterSuccess += f.rerunsAfterSuccess;
      p.durationMs.push(f.healed - f.start);
    }
  }
  const summary = {
    commit: measured,
    started,
    machine: machine(),
    leaseTtlS: ttlS,
    graceMs,
    seeds: results.length,
    seedsPlanned: seeds,
    faults,
    overlaps,
    successReruns,
    runs: results.reduce((n, r) => n + r.report.totals.runs, 0),
    submitted: results.reduce((n, r) => n + r.report.totals.submitted, 0),
    acked: results.reduce((n, r) => n + r.report.totals.acked, 0),
    submissionsLost: results.reduce((n, r) => n + (r.report.counts['submission-lost'] ?? 0), 0),
    notFinal: results.reduce((n, r) => n + r.pending.length, 0),
    violations: results
      .map((r) => ({ seed: r.seed, counts: r.report.counts, examples: r.report.violations.slice(0, 5).map((v) => `${v.kind}: ${v.detail}`) }))
      .filter((v) => Object.keys(v.counts).length > 0),
    perFault,
  };
  writeFileSync(join(dir, 'nemesis-summary.json'), `${JSON.stringify(summary, null, 2)}\n`);
  const md = [
    '# Frozen-node nemesis',
    '',
    `\`npx tsx bench/nemesis.ts ${process.argv.slice(2).join(' ')}\` on commit ${measured}, ${machine()}, started ${started}: ${results.length} of ${seeds} seeds; lease TTL ${ttlS} s, disconnect grace ${graceMs} ms.`,
    '',
    `Overlapping runs of a task: **${overlaps}**; runs of a task after one that succeeded: **${successReruns}** (both from the tasks' own execution records). ` +
      `Submissions a client kept trying that were not taken once the cell was repaired: **${summary.submissionsLost}** (of ${summary.submitted}; ${summary.acked} acknowledged).`,
    '',
    '| fault | count | tasks run again | of them after a success | duration (ms) |',
    '| --- | --- | --- | --- | --- |',
    ...Object.entries(perFault).map(
      ([k, p]) => `| ${k} | ${p.count} | ${p.reruns} | ${p.rerunsAfterSuccess} | ${Math.min(...p.durationMs)}–${Math.max(...p.durationMs)} |`,
    ),
    '',
    ...results.map(
      (r) =>
        `- seed ${r.seed}: ${r.faults.map((f) => `${f.kind} ${f.target} ${f.healed - f.start} ms`).join(', ')}; ${r.report.totals.runs} runs; violations ${Object.keys(r.report.counts).length === 0 ? 'none' : JSON.stringify(r.report.counts)}${r.pending.length > 0 ? `; ${r.pending.length} jobs not final` : ''}`,
    ),
    '',
  ].join('\n');
  writeFileSync(join(dir, 'nemesis.md'), md);
}

for (let i = 0; i < seeds; i++) {
  const seed = firstSeed + i;
  const second = SECOND[(seed - 1) % SECOND.length] as FaultKind;
  const r = await runScenario({
    seed,
    leaseTtlS: ttlS,
    graceMs,
    plan: { sequence: ['monitor-freeze-long', second], firstGapMs: 5000, gapMs: [2000, 3000], quorumDownMs: [4000, 8000] },
    // Each submission keeps to one front-end, retried by its deadline as `tarcil submit` does: a
    // front-end killed in a quorum loss must take the submissions of its clients once it is back.
    sticky: true,
    tailMs: 2000,
    drainMs: 40_000,
    say,
  });
  results.push(r);
  say(`[nemesis] seed ${seed}: ${r.ms.total} ms\n${summarize(r.report)}`);
  write();
}
say(`[nemesis] done: ${join(dir, 'nemesis-summary.json')}`);
