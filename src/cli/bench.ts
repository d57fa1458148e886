/**
 * `tarcil bench <experiment>`: runs one simulator experiment and writes its results — a table in
 * the terminal, JSON, CSV, SVG charts and a markdown report — under bench/results/<experiment> (or --out).
 */
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { join, resolve } from 'node:path';
import Table from 'cli-table3';
import { tableStyle } from './color.ts';
import { renderSvg } from '../sim/charts.ts';
import { EXPERIMENT_NAMES, EXPERIMENTS, type ExperimentResult } from '../sim/experiments/index.ts';
import { setWarmup } from '../sim/run.ts';
import type { TraceContext, TraceInput } from '../sim/experiments/trace.ts';
import { TarcilError } from '../util/errors.ts';

export interface BenchOptions {
  quick: boolean;
  seed: number;
  out?: string;
  /** Worker threads for a sweep's runs (default: one per core; 1: one by one). Same results either way. */
  workers?: number;
  /** A fixed warm-up for every run, ms (default: each workload's own). */
  warmupMs?: number;
  /** `bench trace` only: the trace's files, their format and compression (docs/traces.md). */
  trace?: Partial<TraceInput>;
  /** Where progress and tables go (stderr/stdout by default). */
  write?: (s: string) => void;
  progress?: (s: string) => void;
}

function machine(): string {
  const cpu = os.cpus()[0]?.model ?? 'unknown cpu';
  return `${os.cpus().length} × ${cpu}, ${Math.round(os.totalmem() / 2 ** 30)} GiB, Node ${process.version}`;
}

function csv(rows: Record<string, string | number>[]): string {
  if (rows.length === 0) return '';
  const head = Object.keys(rows[0] as object);
  const cell = (v: unknown): string => {
    const s = typeof v === 'number' ? (Number.isFinite(v) ? String(+v.toPrecision(6)) : '') : typeof v === 'string' ? v : '';
    return /[",\n]/.test(s) ? `"${s.replace(/"/g, '""')}"` : s;
  };
  return `${[head.join(','), ...rows.map((r) => head.map((h) => cell(r[h])).join(','))].join('\n')}\n`;
}

function md(res: ExperimentResult, files: string[]): string {
  const command = typeof res.extra?.command === 'string' ? res.extra.command : `tarcil bench ${res.name}${res.quick ? ' --quick' : ''} --seed ${res.seed}`;
  const lines = [
    `# ${res.title}`,
    '',
    `\`${command}${res.warmupMs === undefined ? '' : ` --warmup-ms ${res.warmupMs}`}\` on ${machine()}; ${(res.wallMs / 1000).toFixed(1)} s.`,
    '',
  ];
  for (const t of res.tables) {
    lines.push(`## ${t.title}`, '', `| ${t.head.join(' | ')} |`, `| ${t.head.map(() => '---').join(' | ')} |`);
    for (const r of t.rows) lines.push(`| ${r.join(' | ')} |`);
    lines.push('');
  }
  if (files.length > 0) {
    lines.push('## Charts', '');
    for (const f of files) lines.push(`![${f}](${f})`, '');
  }
  lines.push('## The paper', '', res.paper, '');
  return lines.join('\n');
}

/** Writes one of an experiment's further files into `out`: merged with what is there when the file says how. */
export function writeResultFile(out: string, f: NonNullable<ExperimentResult['files']>[number]): void {
  const path = join(out, f.name);
  writeFileSync(path, f.merge && existsSync(path) ? f.merge(readFileSync(path, 'utf8')) : f.text);
}

export async function benchCommand(name: string, o: BenchOptions): Promise<ExperimentResult> {
  const exp = Object.hasOwn(EXPERIMENTS, name) ? EXPERIMENTS[name] : undefined;
  if (!exp) {
    throw new TarcilError('INVALID_ARGUMENT', `experiment: unknown experiment '${name}' (known: ${EXPERIMENT_NAMES.join(', ')})`, { field: 'experiment' });
  }
  const write = o.write ?? ((s: string) => process.stdout.write(s));
  const progress = o.progress ?? ((s: string) => process.stderr.write(s));
  const tty = process.stderr.isTTY;
  const started = performance.now();
  setWarmup(o.warmupMs);
  const given = o.trace?.nodes !== undefined ? '--nodes' : o.trace?.pods !== undefined ? '--pods' : undefined;
  if (name !== 'trace' && given) throw new TarcilError('INVALID_ARGUMENT', `${given}: only bench trace reads a trace, not bench ${name}`, { field: given });
  const ctx: TraceContext = {
    quick: o.quick,
    seed: o.seed,
    experiment: name,
    ...(o.warmupMs === undefined ? {} : { warmupMs: o.warmupMs }),
    workers: o.workers ?? os.availableParallelism(),
    progress: (done, total, label) => {
      const width = 24;
      const k = total > 0 ? Math.round((done / total) * width) : width;
      const secs = ((performance.now() - started) / 1000).toFixed(0);
      const line = `[${'#'.repeat(k)}${'.'.repeat(width - k)}] ${done}/${total} ${label} (${secs} s)`;
      progress(tty ? `\r${line.padEnd(90)}` : `${line}\n`);
    },
    ...(name === 'trace' ? { trace: { nodes: '', pods: '', format: 'alibaba', compress: 1, ...o.trace } } : {}),
  };
  const res = exp(ctx);
  if (tty) progress('\n');
  for (const t of res.tables) {
    const table = new Table({ style: tableStyle(), head: t.head });
    for (const r of t.rows) table.push(r.map(String));
    write(`${t.title}\n${table.toString()}\n`);
  }
  // Each experiment has its folder; quick runs go to their own so they never overwrite the
  // committed full results.
  const out = resolve(o.out ?? join(process.cwd(), 'bench', 'results', o.quick ? 'quick' : res.name));
  mkdirSync(out, { recursive: true });
  const files: string[] = [];
  for (const c of res.charts) {
    writeFileSync(join(out, c.file), await renderSvg(c));
    files.push(c.file);
  }
  writeFileSync(join(out, `${res.name}.json`), `${JSON.stringify({ ...res, machine: machine() }, null, 1)}\n`);
  writeFileSync(join(out, `${res.name}.csv`), csv(res.rows));
  writeFileSync(join(out, `${res.name}.md`), md(res, files));
  for (const f of res.files ?? []) writeResultFile(out, f);
  write(`wrote ${res.name}.{json,csv,md}${files.length ? ` and ${files.length} SVG chart(s)` : ''} to ${out} (${(res.wallMs / 1000).toFixed(1)} s)\n`);
  return res;
}
