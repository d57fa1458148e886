/**
 * Fault injection, long run: the short test's cell (test/fault/: a 3-member etcd, two `tarcil
 * server --agents 2` front-ends, four `tarcil monitor --executor process` nodes of 4 RUs, tasks that
 * write their own execution records) under a seeded nemesis that draws every fault kind at random
 * (etcd leader, follower and quorum kills; front-end and monitor SIGSTOPs past the lease TTL, cut
 * and delayed connections, SIGKILLs and restarts), one seed after another within a time budget.
 * Every seed is checked by test/support/fault-checker.ts. Writes bench/results/faults/<name>.md:
 * violations per seed, and per fault kind the scheduling stall (next to etcd's own election time)
 * and the tasks run again. Everything runs on loopback, each seed is bounded in time, and every
 * child process is killed when a seed ends or this process exits.
 *
 * Run: npx tsx bench/faults.ts [--seeds 20] [--minutes 30] [--first-seed 1] [--ttl 5]
 *        [--kinds leader-kill,quorum-loss,...] [--name faults] [--note "text"] [--commit SHA] [--quick]
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { FAULT_KINDS, type FaultKind } from '../test/support/nemesis.ts';
import { VIOLATIONS, summarize, type ViolationKind } from '../test/support/fault-checker.ts';
import { runScenario, type ScenarioResult } from '../test/fault/run.ts';
import { fmt, machine, mdTable, pct, resultsDir } from './lib/report.ts';

function arg(name: string): string | undefined {
  const i = process.argv.indexOf(name);
  return i >= 0 ? process.argv[i + 1] : undefined;
}
const quick = process.argv.includes('--quick');
const seeds = Number(arg('--seeds') ?? (quick ? 2 : 20));
const minutes = Number(arg('--minutes') ?? (quick ? 4 : 30));
const firstSeed = Number(arg('--first-seed') ?? 1);
const ttlS = Number(arg('--ttl') ?? 5);
const name = arg('--name') ?? 'faults';
const note = arg('--note');
const kinds = (arg('--kinds')?.split(',') ?? [...FAULT_KINDS]) as FaultKind[];
for (const k of kinds) if (!FAULT_KINDS.includes(k)) throw new Error(`--kinds: unknown fault kind ${k} (known: ${FAULT_KINDS.join(', ')})`);
if (!(seeds >= 1) || !(minutes > 0) || !(ttlS >= 1)) throw new Error('--seeds, --minutes and --ttl must be positive');

/** The commit measured, and whether src/ differed from it. */
function commit(): string {
  const given = arg('--commit');
  if (given) return given;
  const head = spawnSync('git', ['rev-parse', '--short', 'HEAD'], { encoding: 'utf8' });
  if (head.status !== 0) return 'unknown commit';
  const dirty = spawnSync('git', ['status', '--porcelain', 'src'], { encoding: 'utf8' }).stdout.trim() !== '';
  return `${head.stdout.trim()}${dirty ? ' with uncommitted changes under src/' : ''}`;
}

// Exit on a signal through process.exit, so the cell's exit handler kills every child.
process.on('SIGINT', () => process.exit(130));
process.on('SIGTERM', () => process.exit(143));

const budgetMs = minutes * 60_000;
const perSeedMs = budgetMs / seeds;
// What a seed spends besides its faults: start-up (≈ 10–20 s), the tail, the drain and the check.
const overheadMs = 35_000;
const faultBudgetMs = Math.max(20_000, perSeedMs - overheadMs);
const t0 = Date.now();
const started = new Date().toISOString().slice(0, 16).replace('T', ' ');
const measured = commit();
const results: ScenarioResult[] = [];
const say = (l: string): void => void process.stdout.write(`${new Date().toISOString().slice(11, 19)} ${l}\n`);

function violationText(r: ScenarioResult): string {
  const parts = Object.entries(r.report.counts).map(([k, n]) => `${k} ${n}`);
  if (r.pending.length > 0) parts.push(`not final at the end ${r.pending.length}`);
  return parts.length === 0 ? '0' : parts.join(', ');
}

function report(done: boolean): string {
  const lines: string[] = [];
  if (note) lines.push(`> ${note}`, '');
  lines.push(
    `# Fault injection on a 3-member etcd`,
    '',
    `\`npx tsx bench/faults.ts ${process.argv
      .slice(2)
      .map((a) => (/\s/.test(a) ? '"…"' : a))
      .join(' ')}\` on commit ${measured}, ${machine()}, started ${started} UTC. ` +
      `${results.length} of ${seeds} seeds${done ? '' : ' so far (incomplete)'}, ${fmt((Date.now() - t0) / 60_000, 1)} minutes; lease TTL ${ttlS} s for every front-end and monitor; ` +
      `about ${fmt(faultBudgetMs / 1000, 0)} s of faults per seed, drawn from: ${kinds.join(', ')}.`,
    '',
    'Each seed: a fresh 3-member etcd (auto-compaction off), 2 front-ends with 2 agents each, 4 process-executor monitors of 4 RUs, ' +
      'jobs of 1–3 tasks (15% gangs, 8% cancelled) every 600 ms on average, tasks of 0.5–2.5 s (20%: 6–12 s) that append start and end lines to a file outside etcd; ' +
      "faults one after another with 4–8 s between them. The checker reads etcd's whole history and those records (test/support/fault-checker.ts).",
    '',
    '## Violations per seed',
    '',
    mdTable(
      ['seed', 'faults', 'jobs acked', 'runs', 're-runs (after a success)', 'violations', 'minutes'],
      results.map((r) => [
        r.seed,
        r.faults.map((f) => f.kind).join(', '),
        r.report.totals.acked,
        r.report.totals.runs,
        `${r.report.totals.reruns} (${r.report.totals.rerunsAfterSuccess})`,
        violationText(r),
        fmt(r.ms.total / 60_000, 1),
      ]),
    ),
    '',
  );
  const totals = new Map<ViolationKind, number>();
  for (const r of results) for (const [k, n] of Object.entries(r.report.counts)) totals.set(k as ViolationKind, (totals.get(k as ViolationKind) ?? 0) + n);
  const stuck = results.reduce((a, r) => a + r.pending.length, 0);
  lines.push(
    `Seeds with a violation: ${results.filter((r) => r.report.violations.length > 0 || r.pending.length > 0).length} of ${results.length}. ` +
      `By kind over all seeds: ${[...totals].length === 0 ? 'none' : [...totals].map(([k, n]) => `${k} ${n}`).join(', ')}${stuck ? `; jobs not final at the end ${stuck}` : ''}.`,
    '',
  );

  lines.push('## Stall and re-runs per fault kind', '');
  lines.push(
    'Stall: from the fault (for a quorum loss, from the restart of the killed members) to the first task started by a placement decided after it. ' +
      'etcd election: from the kill (quorum loss: the restart) until a majority of the members report the same leader. ' +
      'Re-runs: runs that repeat a task whose previous run ended after this fault began and before the next one.',
    '',
  );
  const rows: (string | number)[][] = [];
  for (const kind of FAULT_KINDS) {
    const fs = results.flatMap((r) => r.report.faults.filter((f) => f.kind === kind));
    if (fs.length === 0) continue;
    const stalls = fs.flatMap((f) => (f.stallMs !== undefined ? [f.stallMs] : []));
    const elections = fs.flatMap((f) => (f.electionMs !== undefined ? [f.electionMs] : []));
    const over = fs.flatMap((f) => (f.stallMs !== undefined && f.electionMs !== undefined ? [f.stallMs - f.electionMs] : []));
    rows.push([
      kind,
      fs.length,
      stalls.length ? `${fmt(pct(stalls, 0.5) / 1000, 2)} / ${fmt(Math.max(...stalls) / 1000, 2)}` : '-',
      elections.length ? `${fmt(pct(elections, 0.5) / 1000, 2)} / ${fmt(Math.max(...elections) / 1000, 2)}` : '-',
      over.length ? `${fmt(pct(over, 0.5) / 1000, 2)} / ${fmt(Math.max(...over) / 1000, 2)}` : '-',
      fs.reduce((a, f) => a + f.reruns, 0),
      fs.reduce((a, f) => a + f.rerunsAfterSuccess, 0),
      fs.filter((f) => f.stallMs === undefined).length + fs.filter((f) => f.error).length,
    ]);
  }
  lines.push(
    mdTable(
      [
        'fault',
        'n',
        'stall p50 / max s',
        'etcd election p50 / max s',
        'stall − election p50 / max s',
        're-runs',
        'of which after a success',
        'no placement after it, or fault errors',
      ],
      rows,
    ),
    '',
  );
  const base = results.flatMap((r) => (r.report.baseline.p50 !== undefined ? [r.report.baseline.p50] : []));
  lines.push(
    `The same stall measured at fault-free instants (per-seed medians): p50 ${base.length ? fmt(pct(base, 0.5) / 1000, 2) : '-'} s — what "no stall" looks like here.`,
    '',
  );

  lines.push('## Examples of each violation', '');
  for (const kind of VIOLATIONS) {
    const ex = results.flatMap((r) => r.report.violations.filter((v) => v.kind === kind).map((v) => `seed ${r.seed}: ${v.detail}`));
    if (ex.length === 0) continue;
    lines.push(`- **${kind}** (${ex.length}):`, ...ex.slice(0, 3).map((e) => `  - ${e}`));
  }
  if (totals.size === 0) lines.push('None.');
  lines.push(
    '',
    `Reproduce one seed: \`npx tsx bench/faults.ts --seeds 1 --first-seed S --minutes ${fmt(perSeedMs / 60_000, 1)}\` (FAULT_KEEP=1 keeps its logs).`,
  );
  return `${lines.join('\n')}\n`;
}

const outDir = resultsDir(quick, 'faults');
mkdirSync(outDir, { recursive: true });
const out = join(outDir, `${name}.md`);
for (let i = 0; i < seeds; i++) {
  const elapsed = Date.now() - t0;
  if (i > 0 && elapsed + perSeedMs * 0.75 > budgetMs) {
    say(`[faults] time budget reached after ${i} seeds`);
    break;
  }
  const seed = firstSeed + i;
  try {
    const r = await runScenario({ seed, leaseTtlS: ttlS, plan: { kinds, budgetMs: faultBudgetMs, firstGapMs: 6000 }, drainMs: 120_000, say });
    results.push(r);
    say(`[faults] seed ${seed} done in ${fmt(r.ms.total / 1000, 0)} s\n${summarize(r.report)}`);
  } catch (err) {
    say(`[faults] seed ${seed} could not run: ${(err as Error).stack ?? String(err)}`);
  }
  writeFileSync(out, report(false));
}
writeFileSync(out, report(true));
say(`[faults] wrote ${out}`);
process.exit(0);
