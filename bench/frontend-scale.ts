/**
 * A front-end on a large cell: how long `startScheduler` (what `tarcil server` runs) takes to
 * listen, and how much memory it holds, with 1, 2, 4 and 8 agents, on a 10,000-server × 16-RU
 * cell (160,000 RUs) seeded into a private etcd (free port, temporary data directory).
 *
 * Each agent count runs in a fresh child process (so one run's heap does not carry into the
 * next), which measures itself: the time from calling startScheduler to its gRPC port listening,
 * the process's uptime then (module loading included), RSS and heap right after listening, and
 * again after 3 s of idling followed by a full GC (--expose-gc): the resident cost of the
 * front-end's view of the cell. The peak RSS seen by a 20 ms sampler is reported too.
 *
 * Run: npx tsx bench/frontend-scale.ts [--quick] [--label after] [--agents 1,2,4,8] [--cpu-prof DIR] [--command] (--render: the md from the json)
 * --command: then each agent count again as a `tarcil server` process started by src/cli/bin.js,
 * timed from spawn to its "listening" line (the compiled tree when `npm run build` is up to date).
 * --label names the run in bench/results/frontend-scale/frontend-scale.{json,md}; runs with other labels already
 * in the json are kept, so the file holds a "before" and an "after" side by side. --quick: a
 * 1,000-server cell, results under bench/results/quick/.
 */
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { compiledEntry } from '../src/cli/entry.js';
import { loadCatalog } from '../src/model/catalog.ts';
import { startScheduler } from '../src/frontend/runtime.ts';
import { openStore } from '../src/store/index.ts';
import { Keys } from '../src/state/keys.ts';
import { seedCluster, uniformServers } from '../src/state/seed.ts';
import { SystemClock } from '../src/util/clock.ts';
import { createLogger } from '../src/util/log.ts';
import { SeededRng } from '../src/util/rng.ts';
import { ensureEtcd, startEtcd } from '../test/support/etcd.ts';
import { fmt, machine, mdTable, resultsDir, writeResults } from './lib/report.ts';

const SELF = fileURLToPath(import.meta.url);
const PREFIX = '/bench-scale/';
const IDLE_MS = 3000;

interface ChildConfig {
  store: string;
  agents: number;
}

interface ChildResult {
  agents: number;
  /** startScheduler() called → gRPC port listening (taking submissions). */
  listenMs: number;
  /** startScheduler() called → the view of the cell loaded and the agents placing, and the process's age then. */
  readyMs?: number;
  readyUptimeMs?: number;
  /** process.uptime() when listening (node start, module loading and the above). */
  uptimeMs: number;
  rssAtListenMb: number;
  heapAtListenMb: number;
  /** After IDLE_MS and a full GC. */
  rssMb: number;
  heapMb: number;
  peakRssMb: number;
  rus: number;
  /** The front-end did not start: why. */
  error?: string;
}

const mb = (b: number): number => b / 2 ** 20;

async function childMain(cfg: ChildConfig): Promise<void> {
  let peak = 0;
  const sampler = setInterval(() => {
    peak = Math.max(peak, process.memoryUsage().rss);
  }, 20);
  const log = createLogger('tarcil', process.env.TARCIL_LOG ?? 'warn');
  const catalog = loadCatalog();
  const store = await openStore(cfg.store);
  const keys = new Keys(PREFIX);
  const t0 = performance.now();
  const started = startScheduler({
    name: `scale-${process.pid}`,
    store,
    keys,
    catalog,
    clock: new SystemClock(),
    rng: new SeededRng(1),
    log,
    agents: cfg.agents,
    host: '127.0.0.1',
    port: 0,
    // As `tarcil server` starts: listening while the view of the cell loads.
    listenBeforeReady: true,
  });
  const sched = await started.catch((err: unknown) => {
    const blank = { listenMs: NaN, uptimeMs: NaN, rssAtListenMb: NaN, heapAtListenMb: NaN, rssMb: NaN, heapMb: NaN, peakRssMb: mb(peak), rus: 0 };
    process.send?.({
      agents: cfg.agents,
      ...blank,
      error: `${(err as Error).message.split('\n')[0]} (after ${Math.round(performance.now() - t0)} ms)`,
    } satisfies ChildResult);
    process.exit(0);
  });
  const listenMs = performance.now() - t0;
  const uptimeMs = process.uptime() * 1000;
  await sched.ready;
  const readyMs = performance.now() - t0;
  const readyUptimeMs = process.uptime() * 1000;
  const m0 = process.memoryUsage();
  peak = Math.max(peak, m0.rss);
  await new Promise((r) => setTimeout(r, IDLE_MS));
  const gc = (globalThis as { gc?: () => void }).gc;
  gc?.();
  await new Promise((r) => setTimeout(r, 100));
  const m1 = process.memoryUsage();
  peak = Math.max(peak, m1.rss);
  clearInterval(sampler);
  const rus = [...sched.manager.servers.values()].reduce((a, s) => a + s.rus, 0);
  const res: ChildResult = {
    agents: cfg.agents,
    listenMs,
    uptimeMs,
    readyMs,
    readyUptimeMs,
    rssAtListenMb: mb(m0.rss),
    heapAtListenMb: mb(m0.heapUsed),
    rssMb: mb(m1.rss),
    heapMb: mb(m1.heapUsed),
    peakRssMb: mb(peak),
    rus,
  };
  process.send?.(res);
  await sched.close();
  await store.close();
  process.exit(0);
}

function runChild(cfg: ChildConfig, profDir: string | undefined): Promise<ChildResult> {
  const args = ['--expose-gc', ...(profDir ? ['--cpu-prof', '--cpu-prof-dir', profDir] : []), '--import', 'tsx', SELF, '--child', JSON.stringify(cfg)];
  const proc = spawn(process.execPath, args, {
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    env: { ...process.env, TARCIL_LOG: process.env.TARCIL_LOG ?? 'warn' },
  });
  return new Promise((resolve, reject) => {
    let got: ChildResult | undefined;
    proc.on('message', (m) => (got = m as ChildResult));
    proc.on('exit', (code) => (got ? resolve(got) : reject(new Error(`child exited ${code} without a result`))));
  });
}

/**
 * The `tarcil server` command as an operator starts it (src/cli/bin.js: the compiled tree when it
 * is up to date, else the sources through tsx): spawn → its "listening" line on stdout, then its
 * RSS (from /proc) after IDLE_MS; stopped with SIGTERM.
 */
async function runCommand(store: string, agents: number): Promise<CommandResult> {
  const bin = join(SELF, '..', '..', 'src', 'cli', 'bin.js');
  const compiled = compiledEntry(join(SELF, '..', '..')) !== undefined;
  const t0 = performance.now();
  const proc = spawn(
    process.execPath,
    [bin, 'server', '--store', store, '--prefix', PREFIX, '--agents', String(agents), '--port', '0', '--metrics-port', '0'],
    {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, TARCIL_LOG: 'warn' },
    },
  );
  let out = '';
  try {
    let listenMs = NaN;
    const readyMs = await new Promise<number>((resolve, reject) => {
      proc.stdout.on('data', (d: Buffer) => {
        out += d.toString();
        if (Number.isNaN(listenMs) && out.includes('tarcil server listening')) listenMs = performance.now() - t0;
        if (out.includes('tarcil server scheduling')) resolve(performance.now() - t0);
      });
      proc.stderr.on('data', (d: Buffer) => (out += d.toString()));
      proc.on('exit', (code) => reject(new Error(`tarcil server exited ${code}: ${out.slice(-500)}`)));
    });
    await new Promise((r) => setTimeout(r, IDLE_MS));
    const status = readFileSync(`/proc/${proc.pid}/status`, 'utf8');
    const kb = (k: string): number => Number(/\d+/.exec(status.split('\n').find((l) => l.startsWith(k)) ?? '')?.[0] ?? NaN);
    return { agents, compiled, listenMs, readyMs, rssMb: kb('VmRSS:') / 1024, peakRssMb: kb('VmHWM:') / 1024 };
  } catch (err) {
    return { agents, compiled, listenMs: NaN, rssMb: NaN, peakRssMb: NaN, error: (err as Error).message };
  } finally {
    proc.kill('SIGTERM');
    await new Promise((r) => (proc.exitCode !== null ? r(null) : proc.once('exit', r)));
  }
}

interface CommandResult {
  agents: number;
  /** The compiled tree ran (else the sources through tsx). */
  compiled: boolean;
  /** spawn → "tarcil server listening" on stdout, and → "tarcil server scheduling" (the cell loaded). */
  listenMs: number;
  readyMs?: number;
  /** After IDLE_MS (no forced GC: a process as operators run it). */
  rssMb: number;
  peakRssMb: number;
  error?: string;
}

interface Run {
  label: string;
  commit: string;
  when: string;
  machine: string;
  /** The machine's 1-minute load average when the run began (the machine is shared). */
  loadAvg?: number;
  servers: number;
  rusPerServer: number;
  results: ChildResult[];
  /** The same agent counts as `tarcil server` processes (--command). */
  commands?: CommandResult[];
}

async function main(): Promise<void> {
  const argv = process.argv;
  const arg = (name: string): string | undefined => {
    const i = argv.indexOf(name);
    return i >= 0 ? argv[i + 1] : undefined;
  };
  const quick = argv.includes('--quick');
  const label = arg('--label') ?? 'after';
  const counts = (arg('--agents') ?? '1,2,4,8').split(',').map(Number);
  const profDir = arg('--cpu-prof');
  const servers = quick ? 1000 : 10_000;
  const rusPer = 16;

  const loadAvg = os.loadavg()[0] as number;
  const bin = ensureEtcd((m) => process.stdout.write(`${m}\n`));
  const etcd = await startEtcd({ bin });
  const url = etcd.endpoint.replace('http://', 'etcd://');
  try {
    const store = await openStore(url);
    const s0 = performance.now();
    await seedCluster(store, new Keys(PREFIX), uniformServers(servers, rusPer));
    await store.close();
    process.stdout.write(`seeded ${servers} servers × ${rusPer} RUs in ${((performance.now() - s0) / 1000).toFixed(1)} s\n`);
    const results: ChildResult[] = [];
    for (const agents of counts) {
      const r = await runChild({ store: url, agents }, profDir);
      results.push(r);
      if (r.error) {
        process.stdout.write(`${agents} agent(s): did not start: ${r.error}\n`);
        continue;
      }
      process.stdout.write(
        `${agents} agent(s): listening ${fmt(r.listenMs, 0)} ms after startScheduler (uptime ${fmt(r.uptimeMs, 0)} ms), placing after ${fmt(r.readyMs ?? NaN, 0)} ms (uptime ${fmt(r.readyUptimeMs ?? NaN, 0)} ms), ` +
          `RSS ${fmt(r.rssMb, 0)} MB idle (${fmt(r.rssAtListenMb, 0)} at listen, peak ${fmt(r.peakRssMb, 0)}), heap ${fmt(r.heapMb, 0)} MB\n`,
      );
    }
    const commands: CommandResult[] = [];
    if (argv.includes('--command')) {
      for (const agents of counts) {
        const r = await runCommand(url, agents);
        commands.push(r);
        process.stdout.write(
          r.error
            ? `tarcil server, ${agents} agent(s): did not start: ${r.error}\n`
            : `tarcil server (${r.compiled ? 'compiled' : 'sources through tsx'}), ${agents} agent(s): listening ${fmt(r.listenMs, 0)} ms after spawn, placing after ${fmt(r.readyMs ?? NaN, 0)} ms, RSS ${fmt(r.rssMb, 0)} MB idle (peak ${fmt(r.peakRssMb, 0)})\n`,
        );
      }
    }
    const git = spawnSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: join(SELF, '..'), encoding: 'utf8' });
    const commit = git.status === 0 ? git.stdout.trim() : '';
    const run: Run = {
      label,
      commit: process.env.BENCH_COMMIT ?? commit,
      when: new Date().toISOString(),
      machine: machine(),
      loadAvg,
      servers,
      rusPerServer: rusPer,
      results,
      ...(commands.length ? { commands } : {}),
    };
    const out = resultsDir(quick, 'frontend-scale');
    const jsonPath = join(out, 'frontend-scale.json');
    const prior: Run[] = existsSync(jsonPath) ? ((JSON.parse(readFileSync(jsonPath, 'utf8')) as { runs: Run[] }).runs ?? []) : [];
    const runs = [...prior.filter((r) => r.label !== label), run];
    writeResults('frontend-scale', { runs }, markdown(runs), out);
  } finally {
    await etcd.stop();
  }
}

function markdown(runs: Run[]): string {
  const parts = [
    '# A front-end on a 10,000 × 16-RU cell (`bench/frontend-scale.ts`)',
    '',
    'Each row is a fresh process running `startScheduler` (what `tarcil server` runs) against a private etcd',
    'seeded with the cell. *listen*: from calling startScheduler to the gRPC port listening; *uptime*: the',
    "process's age then (node start and module loading included); *placing*: from calling startScheduler to",
    'the view of the cell loaded and the agents placing, and the uptime then (runs since the front-end listens',
    'while the view loads; before, listening came after it); *RSS/heap idle*: after 3 s idle and a',
    'full GC; *+ per agent*: the idle RSS over the 1-agent row, per extra agent.',
    '',
  ];
  for (const run of runs) {
    const one = run.results.find((r) => r.agents === 1);
    parts.push(
      `## ${run.label}${run.commit ? ` (${run.commit})` : ''}`,
      '',
      `${run.servers} servers × ${run.rusPerServer} RUs, ${run.machine}, ${run.when}${run.loadAvg !== undefined ? `, load average ${run.loadAvg.toFixed(1)} when it began` : ''}`,
      '',
    );
    parts.push(
      mdTable(
        ['agents', 'listen ms', 'uptime ms', 'placing ms (uptime)', 'RSS at listen MB', 'RSS idle MB', 'peak RSS MB', 'heap idle MB', '+ per agent MB'],
        run.results.map((r) =>
          r.error
            ? [r.agents, `did not start: ${r.error}`, '', '', '', '', fmt(r.peakRssMb, 0), '', '']
            : [
                r.agents,
                fmt(r.listenMs, 0),
                fmt(r.uptimeMs, 0),
                r.readyMs !== undefined ? `${fmt(r.readyMs, 0)} (${fmt(r.readyUptimeMs ?? NaN, 0)})` : '-',
                fmt(r.rssAtListenMb, 0),
                fmt(r.rssMb, 0),
                fmt(r.peakRssMb, 0),
                fmt(r.heapMb, 0),
                one && !one.error && r.agents > 1 ? fmt((r.rssMb - one.rssMb) / (r.agents - 1), 1) : '-',
              ],
        ),
      ),
      '',
    );
    if (run.commands?.length) {
      parts.push(
        'As `tarcil server` processes (`--command`): from spawn to the "listening" line (and to the "scheduling" line: the cell loaded), RSS after 3 s idle (no forced GC):',
        '',
        mdTable(
          ['agents', 'tree run', 'listen ms after spawn', 'placing ms after spawn', 'RSS idle MB', 'peak RSS MB'],
          run.commands.map((r) =>
            r.error
              ? [r.agents, r.compiled ? 'compiled' : 'sources (tsx)', `did not start: ${r.error}`, '', '', '']
              : [
                  r.agents,
                  r.compiled ? 'compiled' : 'sources (tsx)',
                  fmt(r.listenMs, 0),
                  r.readyMs !== undefined ? fmt(r.readyMs, 0) : '-',
                  fmt(r.rssMb, 0),
                  fmt(r.peakRssMb, 0),
                ],
          ),
        ),
        '',
      );
    }
  }
  return parts.join('\n');
}

const childArg = process.argv.indexOf('--child');
if (childArg >= 0) await childMain(JSON.parse(process.argv[childArg + 1] as string) as ChildConfig);
else if (process.argv.includes('--render')) {
  // Rewrites the markdown from the json (after removing a run from it by hand).
  const out = resultsDir(process.argv.includes('--quick'), 'frontend-scale');
  const { runs } = JSON.parse(readFileSync(join(out, 'frontend-scale.json'), 'utf8')) as { runs: Run[] };
  writeResults('frontend-scale', { runs }, markdown(runs), out);
} else await main();
