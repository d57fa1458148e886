import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { checkBlocks, findBlocks, firstDifference, loadResults, renderBlocks, TABLES, type ResultsSet } from '../../bench/lib/readme-tables.ts';

const README = join(import.meta.dirname, '../../bench/README.md');
const RESULTS = join(import.meta.dirname, '../../bench/results');
const readme = readFileSync(README, 'utf8');
const results = loadResults(RESULTS);

/** A deep copy of the results with one field of one row changed. */
function changed(file: string, match: (row: Record<string, unknown>) => boolean, field: string, to: unknown): ResultsSet {
  const copy: ResultsSet = new Map([...results].map(([k, v]) => [k, structuredClone(v)]));
  const doc = copy.get(file);
  const rows: Record<string, unknown>[] = Array.isArray(doc) ? (doc as Record<string, unknown>[]) : (doc as { rows: Record<string, unknown>[] }).rows;
  const row = rows.find(match);
  if (!row) throw new Error(`no such row in ${file}`);
  row[field] = to;
  return copy;
}

describe('bench/README tables against bench/results', () => {
  it('every generated table in bench/README.md agrees with its committed results file', () => {
    const diffs = checkBlocks(readme, results);
    const message = diffs.map((d) => `${d.id}: ${d.problem} ${d.problem === 'differs' ? firstDifference(d.expected ?? '', d.actual ?? '') : ''}`);
    expect(message).toEqual([]);
  });

  it('the README holds a block for every table the generator knows, each once', () => {
    const ids = findBlocks(readme).map((b) => b.id);
    expect([...ids].sort()).toEqual(TABLES.map((t) => t.id).sort());
  });

  it('a changed number in a results file makes the check name that block and the line', () => {
    const set = changed('sample-size/sample-size.json', (r) => r.R === 8 && r.load === 0.8, 'respMeanMs', 126.8);
    const diffs = checkBlocks(readme, set);
    expect(diffs.map((d) => [d.id, d.problem])).toEqual([['sample-size', 'differs']]);
    const where = firstDifference(diffs[0]!.expected!, diffs[0]!.actual!);
    // The row of R = 8 as committed (its 80% load as the committed results give it) and as changed; its other columns are whatever the results say.
    const doc = results.get('sample-size/sample-size.json');
    const rows = (Array.isArray(doc) ? doc : (doc as { rows: unknown[] }).rows) as Record<string, unknown>[];
    const committed = (rows.find((r) => r.R === 8 && r.load === 0.8)?.respMeanMs as number).toFixed(1).replace('.', '\\.');
    expect(where).toMatch(new RegExp(`README has "\\| 8 \\| [^"]*\\| ${committed} \\| [\\d.]+ \\|`));
    expect(where).toMatch(/results give "\| 8 \| [^"]*\| 126\.8 \| [\d.]+ \|/);
  });

  it('a changed row of a truths summary is reported against the truths table only', () => {
    const set = changed('truths/truths-summary.json', (r) => r.truth === 'committed' && r.policy === 'tarcil', 'pctOracle', 97.04);
    const diffs = checkBlocks(readme, set);
    expect(diffs.map((d) => d.id)).toEqual(['truths']);
    expect(diffs[0]!.expected).toMatch(/\| committed \| 97\.0[ |]/);
  });

  it("a ceiling step's CPU per task, or the summary's commit, is reported against the ceiling table only", () => {
    const copy: ResultsSet = new Map([...results].map(([k, v]) => [k, structuredClone(v)]));
    const run = copy.get('ceiling/ceiling-10k-60s.json') as { steps: { offered: number; msPerTask: { all: number } }[] };
    const step = run.steps.find((s) => Math.round(s.offered) === 400);
    if (!step) throw new Error('the committed ceiling run has no 400-tasks/s step');
    step.msPerTask.all = 0.5;
    const diffs = checkBlocks(readme, copy);
    expect(diffs.map((d) => d.id)).toEqual(['ceiling']);
    expect(firstDifference(diffs[0]!.expected!, diffs[0]!.actual!)).toMatch(/results give "\| 400 \| [^"]*\| 0\.50 \(/);
    (copy.get('ceiling/ceiling-summary.json') as { commit: string }).commit = 'abc1234';
    expect(checkBlocks(readme, copy)[0]!.expected).toMatch(/^Commit abc1234,/);
  });

  it('--write brings a README back to its results: rendering the changed results passes the check on them and fails on the committed ones', () => {
    const set = changed('w2-load/w2-load.json', (r) => r.variant === 'hetero' && r.policy === 'tarcil' && r.load === 0.25, 'saturated', 'yes');
    const rewritten = renderBlocks(readme, set);
    expect(rewritten).not.toBe(readme);
    // The committed row, with its 25% cell (the fourth load) now marked saturated.
    const row = (readme.split('\n').find((l) => l.startsWith('| heterogeneous, tarcil |')) ?? '').split(' | ');
    row[4] = `${row[4] ?? ''} *`;
    expect(rewritten).toContain(row.join(' | '));
    expect(checkBlocks(rewritten, set)).toEqual([]);
    expect(checkBlocks(rewritten, results).map((d) => d.id)).toEqual(['w2-load']);
    // Outside the blocks nothing moves.
    const outside = (t: string): string => t.replace(/<!-- table:[a-z0-9-]+ -->[\s\S]*?<!-- \/table -->/g, '');
    expect(outside(rewritten)).toBe(outside(readme));
  });

  it('an unknown table id and a marker left open are reported, not skipped', () => {
    const text = `${readme}\n<!-- table:no-such-table -->\n| x |\n<!-- /table -->\n\n<!-- table:load -->\n| load |\n`;
    const diffs = checkBlocks(text, results).map((d) => [d.id, d.problem]);
    expect(diffs).toEqual([
      ['no-such-table', 'unknown table'],
      ['load', 'unclosed marker'],
    ]);
  });

  it('a results file missing a field fails with an error naming the file and the field', () => {
    const set = changed('load/load.json', (r) => r.load === 0.85, 'p95Ms', undefined);
    expect(() => checkBlocks(readme, set)).toThrow(/load\/load\.json: field "p95Ms" must be a number/);
  });

  it("a ceiling step without one process's CPU fails naming the file and the field", () => {
    const copy: ResultsSet = new Map([...results].map(([k, v]) => [k, structuredClone(v)]));
    const run = copy.get('ceiling/ceiling-10k-60s.json') as { steps: { msPerTask: Record<string, unknown> }[] };
    delete run.steps[0]!.msPerTask.etcd;
    expect(() => checkBlocks(readme, copy)).toThrow(/ceiling\/ceiling-10k-60s\.json: field "msPerTask\.etcd" must be a number/);
  });

  describe('the command', () => {
    const dir = mkdtempSync(join(tmpdir(), 'readme-tables-'));
    afterAll(() => rmSync(dir, { recursive: true, force: true }));
    const run = (...args: string[]) =>
      spawnSync(process.execPath, ['--import', 'tsx', join(import.meta.dirname, '../../bench/readme-tables.ts'), ...args], { encoding: 'utf8' });

    it('--check exits 1 naming the block a hand edit broke, and --write repairs it', () => {
      const copy = join(dir, 'README.md');
      // The sample-size row of R = 2 with its 80% column (the fifth cell) edited by hand.
      const row = readme.split('\n').find((l) => l.startsWith('| 2 | 101.2 |')) ?? '';
      const cells = row.split(' | ');
      cells[4] = '126.8';
      expect(cells.join(' | ')).not.toBe(row);
      writeFileSync(copy, readme.replace(row, cells.join(' | ')));
      const bad = run('--check', '--readme', copy, '--results', RESULTS);
      expect(bad.status).toBe(1);
      expect(bad.stderr).toContain('block "sample-size" differs');
      expect(bad.stderr).not.toContain('block "load"');
      const fixed = run('--write', '--readme', copy, '--results', RESULTS);
      expect(fixed.status).toBe(0);
      expect(readFileSync(copy, 'utf8')).toBe(readme);
      expect(run('--check', '--readme', copy, '--results', RESULTS).status).toBe(0);
    });
  });
});
