/**
 * Start-up of the `tarcil` command, hyperfine-style: each command run N times (after a warm-up
 * run), wall time from spawn to exit, median / p90 / min reported. `tarcil jobs` is measured
 * against a running front-end (a `tarcil up` on the embedded store, started by this script on a
 * free port), `tarcil sample-size` on its own.
 *
 * Several trees can be measured in the same run, their runs interleaved so that the machine's
 * load falls on all of them alike: `--tree before=/path/to/a/copy` (a copy of the repository with
 * its own dist/ and src/cli/bin.js; node_modules may be a link). The tree this script lives in is
 * always measured, as `--label` (default `this tree`).
 *
 * Run: npx tsx bench/cli-start.ts [--runs 30] [--tree before=/tmp/before] [--label after] [--out bench/results]
 * Writes cli-start.{json,md} under bench/results (or --out).
 */
import { spawn } from 'node:child_process';
import os from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { freePort } from '../test/support/etcd.ts';
import { tarcil as daemon } from '../test/support/procs.ts';
import { fmt, machine, mdTable, pct, writeResults } from './lib/report.ts';

const HERE = join(fileURLToPath(new URL('.', import.meta.url)), '..');

const { values } = parseArgs({
  options: {
    runs: { type: 'string', default: '30' },
    tree: { type: 'string', multiple: true, default: [] },
    label: { type: 'string', default: 'this tree' },
    out: { type: 'string' },
  },
});
const RUNS = Number(values.runs);
const trees: { label: string; root: string }[] = [
  ...values.tree.map((t) => {
    const eq = t.indexOf('=');
    if (eq <= 0) throw new Error(`--tree must be label=path (got '${t}')`);
    return { label: t.slice(0, eq), root: t.slice(eq + 1) };
  }),
  { label: values.label, root: HERE },
];

/** Wall milliseconds of one `node <root>/src/cli/bin.js args` to its exit; throws unless it exits 0. */
function once(root: string, args: string[]): Promise<number> {
  const t0 = process.hrtime.bigint();
  const child = spawn(process.execPath, [join(root, 'src', 'cli', 'bin.js'), ...args], { stdio: ['ignore', 'ignore', 'pipe'], env: { ...process.env, TARCIL_LOG: 'silent' } });
  let err = '';
  child.stderr.on('data', (d: Buffer) => (err += d.toString()));
  return new Promise((resolve, reject) => {
    child.on('close', (code) => {
      const ms = Number(process.hrtime.bigint() - t0) / 1e6;
      if (code === 0) resolve(ms);
      else reject(new Error(`tarcil ${args.join(' ')} (${root}) exited ${code}: ${err}`));
    });
  });
}

const port = await freePort();
const up = daemon(['up', '--port', String(port), '--metrics-port', '0', '--http-port', '0']);
try {
  await up.waitFor(/Scheduler gRPC/, 120_000);
  const server = `127.0.0.1:${port}`;
  const commands = [
    { name: 'tarcil jobs', args: ['jobs', '--server', server] },
    { name: 'tarcil sample-size', args: ['sample-size', '--quantile', '0.8'] },
    { name: 'tarcil --version', args: ['--version'] },
  ];
  const baseline = { name: 'node -e 0 (Node alone)', ms: [] as number[] };
  const times = new Map<string, number[]>();
  const key = (c: string, t: string): string => `${c}\u0000${t}`;
  for (const c of commands) for (const t of trees) await once(t.root, c.args); // warm-up: page cache
  for (let i = 0; i < RUNS; i++) {
    for (const c of commands) {
      for (const t of trees) {
        const k = key(c.name, t.label);
        times.set(k, [...(times.get(k) ?? []), await once(t.root, c.args)]);
      }
    }
    const t0 = process.hrtime.bigint();
    await new Promise<void>((resolve) => spawn(process.execPath, ['-e', '0'], { stdio: 'ignore' }).on('close', () => resolve()));
    baseline.ms.push(Number(process.hrtime.bigint() - t0) / 1e6);
    process.stderr.write(`\r${i + 1}/${RUNS}`);
  }
  process.stderr.write('\n');
  const stats = (xs: number[]): { median: number; p90: number; min: number } => {
    const s = [...xs].sort((a, b) => a - b);
    return { median: pct(s, 0.5), p90: pct(s, 0.9), min: s[0] ?? NaN };
  };
  const rows: (string | number)[][] = [];
  const data: Record<string, unknown>[] = [];
  for (const c of commands) {
    for (const t of trees) {
      const s = stats(times.get(key(c.name, t.label)) ?? []);
      rows.push([c.name, t.label, fmt(s.median, 0), fmt(s.p90, 0), fmt(s.min, 0)]);
      data.push({ command: c.name, args: c.args, tree: t.label, runs: RUNS, ...s, ms: times.get(key(c.name, t.label)) });
    }
  }
  const b = stats(baseline.ms);
  rows.push([baseline.name, '', fmt(b.median, 0), fmt(b.p90, 0), fmt(b.min, 0)]);
  const md = [
    '# Start-up of the tarcil command',
    '',
    `\`npx tsx bench/cli-start.ts --runs ${RUNS}${values.tree.map((t) => ` --tree ${t.split('=')[0]}=…`).join('')}\` on ${machine()}; load average at the end ${os.loadavg().map((x) => x.toFixed(1)).join(' ')}.`,
    '',
    `Wall time from spawn to exit of \`node src/cli/bin.js …\` (the \`tarcil\` command, compiled tree), ${RUNS} runs each after one warm-up run, the trees' runs interleaved. \`tarcil jobs\` asks a \`tarcil up\` (embedded store) on loopback. Milliseconds.`,
    '',
    mdTable(['command', 'tree', 'median', 'p90', 'min'], rows),
    '',
  ].join('\n');
  for (const f of writeResults('cli-start', { machine: machine(), runs: RUNS, trees, results: data, node: b }, md, values.out)) process.stderr.write(`wrote ${f}\n`);
  process.stdout.write(md);
} finally {
  await up.kill();
}

