/**
 * Start-up of the `tarcil` command, hyperfine-style: each command run N times (after a warm-up
 * run), wall time from spawn to exit, median / p90 / min reported. `tarcil jobs` is measured
 * against a running front-end (a `tarcil up` on the embedded store, started by this script on a
 * free port it binds itself and names in its banner), `tarcil sample-size` on its own.
 *
 * Several trees can be measured in the same run, their runs interleaved so that the machine's
 * load falls on all of them alike: `--tree before=/path/to/a/copy` (a copy of the repository with
 * its own dist/ and src/cli/bin.js; node_modules may be a link). The tree this script lives in is
 * always measured, as `--label` (default `this tree`).
 *
 * Run: npx tsx bench/cli-start.ts [--runs 30] [--tree before=/tmp/before] [--label after] [--out bench/results/cli-start]
 * Writes cli-start.{json,md} under bench/results/cli-start (or --out).
 */
import { spawn } from 'node:child_process';
import os from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { tarcil as daemon } from '../test/support/procs.ts';
import { fmt, machine, mdTable, pct, resultsDir, writeResults } from './lib/report.ts';

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

/**
 * The environments each command runs in: this shell's, and, when it sets NODE_EXTRA_CA_CERTS, the
 * same without it. Node reads and parses that file of CA certificates at every start, before any
 * of the program runs (on this machine's Debian bundle of about 140 certificates: some 75 ms),
 * so it is a cost of Node's start on this machine, not of tarcil's; both are reported.
 */
const EXTRA_CA = 'NODE_EXTRA_CA_CERTS';
const envs: { label: string; env: NodeJS.ProcessEnv }[] = [
  { label: process.env[EXTRA_CA] ? `this shell (${EXTRA_CA} set)` : 'this shell', env: { ...process.env, TARCIL_LOG: 'silent' } },
];
if (process.env[EXTRA_CA]) {
  const { [EXTRA_CA]: _ca, ...rest } = process.env;
  envs.push({ label: `without ${EXTRA_CA}`, env: { ...rest, TARCIL_LOG: 'silent' } });
}

/** Wall milliseconds of one `node <root>/src/cli/bin.js args` to its exit; throws unless it exits 0. */
function once(root: string, args: string[], env: NodeJS.ProcessEnv): Promise<number> {
  const t0 = process.hrtime.bigint();
  const child = spawn(process.execPath, [join(root, 'src', 'cli', 'bin.js'), ...args], { stdio: ['ignore', 'ignore', 'pipe'], env });
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

const NODE_ALONE = 'node -e 0 (Node alone)';
const up = daemon(['up', '--port', '0', '--metrics-port', '0', '--http-port', '0']);
try {
  const server = (await up.waitFor(/Scheduler gRPC\s+(\S+:\d+)\s/, 120_000))[1] ?? '';
  const commands = [
    { name: 'tarcil jobs', args: ['jobs', '--server', server] },
    { name: 'tarcil sample-size', args: ['sample-size', '--quantile', '0.8'] },
    { name: 'tarcil --version', args: ['--version'] },
  ];
  const times = new Map<string, number[]>();
  const key = (...parts: string[]): string => parts.join('\u0000');
  const node = (env: NodeJS.ProcessEnv): Promise<number> => {
    const t0 = process.hrtime.bigint();
    return new Promise((resolve) =>
      spawn(process.execPath, ['-e', '0'], { stdio: 'ignore', env }).on('close', () => resolve(Number(process.hrtime.bigint() - t0) / 1e6)),
    );
  };
  const add = (k: string, ms: number): void => {
    times.set(k, [...(times.get(k) ?? []), ms]);
  };
  for (const c of commands) for (const t of trees) await once(t.root, c.args, envs[0]!.env); // warm-up: page cache
  for (let i = 0; i < RUNS; i++) {
    for (const e of envs) {
      for (const c of commands) for (const t of trees) add(key(c.name, t.label, e.label), await once(t.root, c.args, e.env));
      add(key(NODE_ALONE, '', e.label), await node(e.env));
    }
    process.stderr.write(`\r${i + 1}/${RUNS}`);
  }
  process.stderr.write('\n');
  const stats = (xs: number[]): { median: number; p90: number; min: number } => {
    const s = [...xs].sort((a, b) => a - b);
    return { median: pct(s, 0.5), p90: pct(s, 0.9), min: s[0] ?? NaN };
  };
  const rows: (string | number)[][] = [];
  const data: Record<string, unknown>[] = [];
  for (const e of envs) {
    const alone = stats(times.get(key(NODE_ALONE, '', e.label)) ?? []);
    for (const c of commands) {
      for (const t of trees) {
        const ms = times.get(key(c.name, t.label, e.label)) ?? [];
        const s = stats(ms);
        rows.push([c.name, t.label, e.label, fmt(s.median, 0), fmt(s.p90, 0), fmt(s.min, 0), fmt(s.median - alone.median, 0)]);
        data.push({ command: c.name, args: c.args, tree: t.label, environment: e.label, runs: RUNS, ...s, overNodeMedian: s.median - alone.median, ms });
      }
    }
    rows.push([NODE_ALONE, '', e.label, fmt(alone.median, 0), fmt(alone.p90, 0), fmt(alone.min, 0), '']);
    data.push({ command: NODE_ALONE, environment: e.label, runs: RUNS, ...alone, ms: times.get(key(NODE_ALONE, '', e.label)) });
  }
  const md = [
    '# Start-up of the tarcil command',
    '',
    `\`npx tsx bench/cli-start.ts --runs ${RUNS}${values.tree.map((t) => ` --tree ${t.split('=')[0]}=…`).join('')}\` on ${machine()}; load average at the end ${os
      .loadavg()
      .map((x) => x.toFixed(1))
      .join(' ')}.`,
    '',
    `Wall time from spawn to exit of \`node src/cli/bin.js …\` (the \`tarcil\` command, compiled tree), ${RUNS} runs each after one warm-up run, the trees' and environments' runs interleaved. \`tarcil jobs\` asks a \`tarcil up\` (embedded store) on loopback. "Over Node" is the median less Node's own start (\`node -e 0\`) in the same environment. Milliseconds.`,
    ...(envs.length > 1
      ? [
          '',
          `This shell sets ${EXTRA_CA}: Node then reads and parses that file of CA certificates at every start, before the program runs, so every Node program here starts later by the difference between the two \`node -e 0\` rows. The rows without it are how the command starts on a machine that does not set it.`,
        ]
      : []),
    '',
    mdTable(['command', 'tree', 'environment', 'median', 'p90', 'min', 'over Node'], rows),
    '',
  ].join('\n');
  for (const f of writeResults(
    'cli-start',
    { machine: machine(), runs: RUNS, trees, environments: envs.map((e) => e.label), results: data },
    md,
    values.out ?? resultsDir(false, 'cli-start'),
  ))
    process.stderr.write(`wrote ${f}\n`);
  process.stdout.write(md);
} finally {
  await up.kill();
}
