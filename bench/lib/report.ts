import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import os from 'node:os';
import { quantile } from 'simple-statistics';

export const RESULTS_DIR = join(dirname(fileURLToPath(import.meta.url)), '..', 'results');

export function pct(xs: readonly number[], q: number): number {
  return xs.length === 0 ? NaN : quantile([...xs], q);
}

export function machine(): string {
  const cpu = os.cpus()[0]?.model ?? 'unknown cpu';
  return `${os.cpus().length} × ${cpu}, ${Math.round(os.totalmem() / 2 ** 30)} GiB, Node ${process.version}`;
}

/**
 * Where a run writes: its experiment's folder, bench/results/<experiment>, or bench/results/quick
 * for a --quick run (never committed).
 */
export function resultsDir(quick: boolean, experiment?: string): string {
  return quick ? join(RESULTS_DIR, 'quick') : experiment === undefined ? RESULTS_DIR : join(RESULTS_DIR, experiment);
}

/** Writes <name>.json and <name>.md under outDir and returns the paths. */
export function writeResults(name: string, data: unknown, markdown: string, outDir: string): string[] {
  mkdirSync(outDir, { recursive: true });
  const json = join(outDir, `${name}.json`);
  const md = join(outDir, `${name}.md`);
  writeFileSync(json, `${JSON.stringify(data, null, 2)}\n`);
  writeFileSync(md, markdown.endsWith('\n') ? markdown : `${markdown}\n`);
  return [json, md];
}

export function mdTable(head: string[], rows: (string | number)[][]): string {
  const line = (cells: (string | number)[]): string => `| ${cells.map(String).join(' | ')} |`;
  return [line(head), line(head.map(() => '---')), ...rows.map(line)].join('\n');
}

export function fmt(x: number, digits = 1): string {
  return Number.isFinite(x) ? x.toFixed(digits) : '-';
}
