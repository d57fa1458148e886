/**
 * How much the neighbours' side should weigh where no RU suits the newcomer (two-sided Q below
 * T_W: the newcomer's own Q times the worst resident's Q to the power w; src/quality
 * NEIGHBOUR_WEIGHT): tarcil's default configuration at each weight on W3 under every ground truth
 * of `tarcil bench truths`, each seed, read against the oracle on the same jobs. Prints one JSON
 * line per run and writes `neighbour-weight.json` and `neighbour-weight.md` (per truth and seed,
 * then per weight: mean, worst cell, worst 5th-percentile job, mean rank, cells at or above the
 * weight `--against`).
 *
 * Run: npx tsx bench/neighbour-weight.ts [--weights 0,0.25,0.5,0.75,1] [--seeds 1,2,3] [--parallel 2]
 *        [--against 1] [--out bench/results/truths/neighbour-weight]
 * `--option platformWeight` sweeps the other weight of the score instead (speed^w against Q; the
 * values are then its, in [0, 10]; the folder `platform-weight`). `--option minR` sweeps the
 * smallest sample per task (R = max(minR, the x^R guarantee's), capped at 32; the folder `min-samples`).
 * `--option packJobs --weights 0,1 --against 0` runs the default as it is (0) and with every job's
 * tasks packed server by server (1: the simulator's `packJobs`; the folder `packed-jobs`).
 * Each run is a child process of this script (`--cell truth|seed|weight`, weight `oracle` for the
 * oracle); the oracle's per-job figures are kept in a temporary folder for the runs that read them.
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { quantileSorted } from 'simple-statistics';
import { ratiosToOracle, TRUTHS } from '../src/sim/experiments/truths.ts';
import { runSim } from '../src/sim/run.ts';
import { w3 } from '../src/sim/workloads.ts';

const { values } = parseArgs({
  options: {
    option: { type: 'string', default: 'neighbourWeight' },
    weights: { type: 'string' },
    seeds: { type: 'string', default: '1,2,3' },
    parallel: { type: 'string', default: '2' },
    against: { type: 'string', default: '1' },
    jobs: { type: 'string', default: '7200' },
    out: { type: 'string' },
    cell: { type: 'string' },
    cache: { type: 'string' },
  },
});

const numbers = (flag: string, text: string, ok: (x: number) => boolean, rule: string): number[] => {
  const xs = text.split(',').map((x) => Number(x.trim()));
  if (xs.length === 0 || xs.some((x) => !Number.isFinite(x) || !ok(x))) throw new Error(`--${flag}: must be ${rule}, between commas (got '${text}')`);
  return xs;
};
const jobs = numbers('jobs', values.jobs, (x) => Number.isInteger(x) && x > 0, 'a positive integer')[0] as number;
/** The weights this script sweeps: the core option, its range, its default values and results folder. */
const OPTIONS = {
  neighbourWeight: { max: 1, values: '0,0.25,0.5,0.75,1', folder: 'neighbour-weight', what: "the neighbours' side weighed at each weight below T_W" },
  platformWeight: { max: 10, values: '0.5,1,2', folder: 'platform-weight', what: "the platform's speed weighed at each weight against Q" },
  minR: { min: 1, integer: true, max: 32, values: '2,4,8,16,32', folder: 'min-samples', what: 'the smallest sample per task R (capR stays 32)' },
  packJobs: { min: 0, integer: true, max: 1, values: '0,1', folder: 'packed-jobs', what: "every job's tasks packed server by server (weight 1) or not (0)" },
} as const;
if (!(values.option in OPTIONS)) throw new Error(`--option: must be ${Object.keys(OPTIONS).join(' or ')} (got '${values.option}')`);
const option = values.option as keyof typeof OPTIONS;
const opt = OPTIONS[option];

interface Row {
  truth: string;
  seed: number;
  weight: number;
  pctOracle: number;
  p5PctOracle: number;
  below50PctOracle: number;
  s: number;
}

const oracleFile = (dir: string, truth: string, seed: number): string => join(dir, `oracle-${truth.replace(/[^a-z0-9.]+/gi, '_')}-${seed}.json`);

/** One run in this process: the oracle (its per-job figures to the cache) or tarcil at one weight (read against them). */
function runCell(cell: string, cache: string): void {
  const [truthName, seedText, weightText] = cell.split('|');
  const truth = TRUTHS.find((t) => t.name === truthName);
  if (!truth) throw new Error(`--cell: no truth '${truthName}' (known: ${TRUTHS.map((t) => t.name).join(', ')})`);
  const seed = Number(seedText);
  const t0 = performance.now();
  if (weightText === 'oracle') {
    const r = runSim({ workload: w3({ jobs }), policy: { name: 'oracle' }, seed, truth });
    const byJob = r.records.map((x) => [x.arrival, Math.min(1, x.ideal / x.response)]);
    writeFileSync(oracleFile(cache, truth.name, seed), JSON.stringify({ mean: r.summary.perfMean, byJob }));
    return;
  }
  const weight = Number(weightText);
  const o = JSON.parse(readFileSync(oracleFile(cache, truth.name, seed), 'utf8')) as { mean: number; byJob: [number, number][] };
  const policy = option === 'packJobs' ? { name: 'tarcil', packJobs: weight === 1 } : { name: 'tarcil', core: { [option]: weight } };
  const r = runSim({ workload: w3({ jobs }), policy, seed, truth });
  const ratios = ratiosToOracle(r.records, new Map(o.byJob)).map((x) => x.ratio);
  const row: Row = {
    truth: truth.name,
    seed,
    weight,
    pctOracle: (100 * r.summary.perfMean) / o.mean,
    p5PctOracle: 100 * quantileSorted(ratios, 0.05),
    below50PctOracle: (100 * ratios.filter((x) => x < 0.5).length) / ratios.length,
    s: Math.round((performance.now() - t0) / 1000),
  };
  console.log(JSON.stringify(row));
}

/** Runs the cells `parallel` at a time as children of this script; the JSON lines they print. */
async function runAll(cells: string[], parallel: number, cache: string): Promise<string[]> {
  const out: string[] = [];
  let next = 0;
  const one = async (): Promise<void> => {
    while (next < cells.length) {
      const cell = cells[next++] as string;
      const text = await new Promise<string>((resolve, reject) => {
        const args = [process.argv[1] as string, '--cell', cell, '--cache', cache, '--jobs', String(jobs), '--option', option];
        const child = spawn(process.execPath, [...process.execArgv, ...args], {
          stdio: ['ignore', 'pipe', 'inherit'],
        });
        let buf = '';
        child.stdout.on('data', (d: Buffer) => (buf += d.toString()));
        child.on('error', reject);
        child.on('exit', (code) => (code === 0 ? resolve(buf) : reject(new Error(`run ${cell} exited with ${code}`))));
      });
      for (const line of text.split('\n')) {
        if (!line.startsWith('{')) continue;
        console.log(line);
        out.push(line);
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(parallel, cells.length) }, one));
  return out;
}

const f1 = (x: number): string => x.toFixed(1);
const f2 = (x: number): string => x.toFixed(2);

function report(rows: Row[], weights: number[], seeds: number[], against: number, command: string): string {
  const at = (t: string, s: number, w: number): Row | undefined => rows.find((r) => r.truth === t && r.seed === s && r.weight === w);
  const cells = TRUTHS.flatMap((t) => seeds.map((s) => [t.name, s] as const));
  const ranks = new Map<number, number[]>(weights.map((w) => [w, []]));
  for (const [t, s] of cells) {
    const sorted = [...weights].sort((a, b) => (at(t, s, b)?.pctOracle ?? 0) - (at(t, s, a)?.pctOracle ?? 0));
    sorted.forEach((w, i) => ranks.get(w)?.push(i + 1));
  }
  const lines = [
    option === 'neighbourWeight'
      ? '# How much the neighbours weigh below T_W (`bench/neighbour-weight.ts`)'
      : option === 'packJobs'
        ? "# Every job's tasks packed server by server, across truths (`bench/neighbour-weight.ts`)"
        : `# The ${option} of the score across truths (\`bench/neighbour-weight.ts\`)`,
    '',
    `\`${command}\`. W3 (${jobs} jobs), tarcil's default configuration with ${opt.what}, % of the oracle on the same jobs [5th-percentile job as % of the oracle's figure for it].`,
    '',
    `| truth | ${weights.map((w) => `weight ${w}, seeds ${seeds.join(' / ')}`).join(' | ')} |`,
    `| --- | ${weights.map(() => '---').join(' | ')} |`,
    ...TRUTHS.map(
      (t) =>
        `| ${t.name} | ${weights
          .map((w) =>
            seeds
              .map((s) => {
                const r = at(t.name, s, w);
                return r ? `${f1(r.pctOracle)} [${f1(r.p5PctOracle)}]` : '–';
              })
              .join(' / '),
          )
          .join(' | ')} |`,
    ),
    '',
    `Across the ${cells.length} cells (truth and seed):`,
    '',
    `| weight | mean, % of the oracle | worst cell | worst 5th-percentile job | mean rank | cells at or above weight ${against} |`,
    '| --- | --- | --- | --- | --- | --- |',
    ...weights.map((w) => {
      const mine = cells.map(([t, s]) => at(t, s, w)).filter((r): r is Row => r !== undefined);
      const rk = ranks.get(w) ?? [];
      const geq = cells.filter(([t, s]) => (at(t, s, w)?.pctOracle ?? -1) >= (at(t, s, against)?.pctOracle ?? Infinity)).length;
      return `| ${w} | ${f2(mine.reduce((a, r) => a + r.pctOracle, 0) / mine.length)} | ${f2(Math.min(...mine.map((r) => r.pctOracle)))} | ${f1(Math.min(...mine.map((r) => r.p5PctOracle)))} | ${f2(rk.reduce((a, b) => a + b, 0) / rk.length)} | ${geq} of ${cells.length} |`;
    }),
    '',
  ];
  return lines.join('\n');
}

if (values.cell !== undefined) {
  if (!values.cache) throw new Error('--cell needs --cache');
  runCell(values.cell, values.cache);
} else {
  const lo = 'min' in opt ? opt.min : 0;
  const whole = 'integer' in opt && opt.integer;
  const weights = numbers(
    'weights',
    values.weights ?? opt.values,
    (x) => x >= lo && x <= opt.max && (!whole || Number.isInteger(x)),
    `${whole ? 'integers' : 'numbers'} in [${lo}, ${opt.max}]`,
  );
  const seeds = numbers('seeds', values.seeds, (x) => Number.isInteger(x) && x > 0, 'positive integers');
  const parallel = numbers('parallel', values.parallel, (x) => Number.isInteger(x) && x > 0, 'a positive integer')[0] as number;
  const against = numbers('against', values.against, (x) => weights.includes(x), 'one of --weights')[0] as number;
  const cache = mkdtempSync(join(tmpdir(), 'tarcil-nw-'));
  try {
    const pairs = TRUTHS.flatMap((t) => seeds.map((s) => `${t.name}|${s}`));
    await runAll(
      pairs.map((p) => `${p}|oracle`),
      parallel,
      cache,
    );
    const lines = await runAll(
      pairs.flatMap((p) => weights.map((w) => `${p}|${w}`)),
      parallel,
      cache,
    );
    const rows = lines.map((l) => JSON.parse(l) as Row);
    const command = `npx tsx bench/neighbour-weight.ts ${option === 'neighbourWeight' ? '' : `--option ${option} `}--weights ${weights.join(',')} --seeds ${seeds.join(',')} --against ${against}${jobs === 7200 ? '' : ` --jobs ${jobs}`}`;
    const out = values.out ?? join('bench', 'results', 'truths', opt.folder);
    if (!existsSync(out)) mkdirSync(out, { recursive: true });
    writeFileSync(join(out, `${opt.folder}.json`), `${JSON.stringify({ command, option, jobs, weights, seeds, rows }, null, 1)}\n`);
    writeFileSync(join(out, `${opt.folder}.md`), report(rows, weights, seeds, against, command));
    console.log(`wrote ${join(out, `${opt.folder}.{json,md}`)}`);
  } finally {
    rmSync(cache, { recursive: true, force: true });
  }
}
