/**
 * The table of bench/oracle-ladder.ts: per truth, each rung's mean as % of the full oracle's
 * [5th-percentile job], seeds side by side. Written to the run's ladder.md and, from the committed
 * ladder.json, to bench/README's `oracle-ladder` block (bench/readme-tables.ts checks they agree).
 */
import { mdTable } from './report.ts';

export interface LadderRow {
  truth: string;
  rung: string;
  seed: number;
  pctOracle: number;
  p5PctOracle: number;
  s: number;
}

export function ladderTable(rows: readonly LadderRow[]): string {
  const seeds = [...new Set(rows.map((r) => r.seed))].sort((a, b) => a - b);
  const truths: string[] = [];
  const rungs: string[] = [];
  for (const r of rows) {
    if (!truths.includes(r.truth)) truths.push(r.truth);
    if (!rungs.includes(r.rung)) rungs.push(r.rung);
  }
  const cell = (t: string, rung: string): string =>
    seeds
      .map((s) => rows.find((r) => r.truth === t && r.rung === rung && r.seed === s))
      .map((r) => (r ? `${r.pctOracle.toFixed(1)} [${r.p5PctOracle.toFixed(1)}]` : '–'))
      .join(' / ');
  const caption = `% of the full oracle's mean on the same jobs [the 5th-percentile job as % of the oracle's figure for it], seed${seeds.length > 1 ? 's' : ''} ${seeds.join(' / ')}:`;
  return `${caption}\n\n${mdTable(
    ['truth', ...rungs],
    truths.map((t) => [t, ...rungs.map((r) => cell(t, r))]),
  )}`;
}
