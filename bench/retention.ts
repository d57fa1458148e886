/**
 * Key count and etcd database size under steady load, with retention and compaction on (a short
 * --retain of 20 s, compaction 30 s behind) and off, each on a fresh private etcd: a job manager
 * with 3 agents places 2-task jobs of 1 s (each submitted with a request id) on 40 simulated
 * servers × 8 RUs at half load, and a row is taken every 10 s: keys under the cluster's prefix,
 * the revision, the compacted revision, etcd's DB size (allocated, and in use). At the end etcd is
 * defragmented once, to show what the allocated size falls back to.
 *
 * Run: npx tsx bench/retention.ts [--quick] (quick: 45 s per run instead of 120 s)
 */
import { Etcd3 } from 'etcd3';
import { JobManager } from '../src/owner/manager.ts';
import { loadCatalog, parseJobSpec } from '../src/model/catalog.ts';
import { SimulatedExecutor } from '../src/monitor/executor.ts';
import { LocalMonitor } from '../src/monitor/monitor.ts';
import { Housekeeper } from '../src/state/housekeeping.ts';
import { Keys } from '../src/state/keys.ts';
import { uniformServers } from '../src/state/seed.ts';
import { openStore } from '../src/store/index.ts';
import { SystemClock } from '../src/util/clock.ts';
import { createLogger } from '../src/util/log.ts';
import { SeededRng } from '../src/util/rng.ts';
import { ensureEtcd, startEtcd } from '../test/support/etcd.ts';
import { machine, mdTable, resultsDir, writeResults } from './lib/report.ts';

const quick = process.argv.includes('--quick');
const RUN_MS = quick ? 45_000 : 120_000;
const SAMPLE_MS = 10_000;
const SERVERS = 40;
const RUS = 8;
const TASK_MS = 1000;
const TASKS_PER_JOB = 2;
const LOAD = 0.5;
const RETAIN_MS = 20_000;
const MARGIN_MS = 30_000;
/** Request ids are kept 30 s here, so that a run of minutes shows them go; the CLI's floor is 10 min. */
const REQUEST_RETAIN_MS = 30_000;
const PROFILES = ['spark-lr', 'hadoop-map', 'memcached', 'tpch-scan', 'spec-mcf', 'parsec-canneal'];

interface Sample {
  t: number;
  keys: number;
  jobs: number;
  revision: number;
  compacted: number;
  dbSize: number;
  dbInUse: number;
}

interface Run {
  mode: 'retention on' | 'retention off';
  submitted: number;
  finished: number;
  deletedJobs: number;
  deletedRequests: number;
  compactions: number;
  samples: Sample[];
  afterDefrag: { dbSize: number; dbInUse: number };
}

const keepAlive = setInterval(() => undefined, 1 << 30);
const log = createLogger('bench', 'silent');
const clock = new SystemClock();
const catalog = loadCatalog();
const MiB = (b: number): string => (b / 2 ** 20).toFixed(1);

async function run(on: boolean): Promise<Run> {
  const etcd = await startEtcd({ bin: ensureEtcd((m) => process.stdout.write(`${m}\n`)) });
  const admin = new Etcd3({ hosts: [etcd.endpoint] });
  const store = await openStore(etcd.endpoint.replace('http://', 'etcd://'));
  const keys = new Keys('/bench-retention/');
  try {
    const monitors = uniformServers(SERVERS, RUS).map(
      (s) =>
        new LocalMonitor({
          store,
          keys,
          clock,
          log,
          server: s,
          executor: new SimulatedExecutor(clock),
          leaseTtlSeconds: 10,
          loadThreshold: 0,
          slowdown: () => 1,
        }),
    );
    for (const m of monitors) await m.start();
    const mgr = new JobManager({ process: 'bench', store, keys, clock, rng: new SeededRng(5), log, agents: 3, leaseTtlSeconds: 10 });
    await mgr.start();
    const hk = on
      ? new Housekeeper({
          store,
          keys,
          clock,
          log,
          process: 'bench',
          retainMs: RETAIN_MS,
          requestRetainMs: REQUEST_RETAIN_MS,
          compactMarginMs: MARGIN_MS,
          compactEveryMs: 5000,
          sweepEveryMs: 2000,
        })
      : undefined;
    hk?.start();

    const samples: Sample[] = [];
    const t0 = clock.now();
    const sample = async (): Promise<void> => {
      let got: [Awaited<ReturnType<typeof store.range>>, Awaited<ReturnType<typeof store.range>>, Awaited<ReturnType<typeof admin.maintenance.status>>];
      try {
        got = await Promise.all([store.range(keys.prefix), store.range(keys.jobs()), admin.maintenance.status()]);
      } catch (err) {
        process.stdout.write(`sample skipped: ${String(err)}\n`);
        return;
      }
      const [all, jobs, st] = got;
      const s: Sample = {
        t: Math.round((clock.now() - t0) / 1000),
        keys: all.kvs.length,
        jobs: jobs.kvs.length,
        revision: all.revision,
        compacted: hk?.stats.compactedTo ?? 0,
        dbSize: Number(st.dbSize),
        dbInUse: Number(st.dbSizeInUse),
      };
      samples.push(s);
      process.stdout.write(
        `${on ? 'on ' : 'off'} t=${s.t}s keys ${s.keys} jobs ${s.jobs} rev ${s.revision} compacted ${s.compacted} db ${MiB(s.dbSize)} MiB (in use ${MiB(s.dbInUse)})\n`,
      );
    };
    await sample();
    let nextSample = t0 + SAMPLE_MS;
    const ratePerMs = (LOAD * SERVERS * RUS) / (TASK_MS * TASKS_PER_JOB);
    const rng = new SeededRng(17);
    let i = 0;
    const submits: Promise<unknown>[] = [];
    // Arrival times drawn ahead: a submission that falls behind them is made at once, so both
    // runs submit the same jobs at the same offered rate.
    let at = t0;
    while (at - t0 < RUN_MS) {
      const now = clock.now();
      const spec = parseJobSpec(
        { name: `r${i}`, profile: PROFILES[i % PROFILES.length], tasks: TASKS_PER_JOB, durationMs: TASK_MS, maxQueueMs: 2000 },
        catalog,
        { id: `r${String(i).padStart(7, '0')}`, now },
      );
      submits.push(mgr.accept(spec, { requestId: `req-${i}` }).catch(() => undefined));
      i++;
      if (submits.length > 1000) await Promise.all(submits.splice(0));
      if (now >= nextSample) {
        nextSample += SAMPLE_MS;
        await sample();
      }
      at += -Math.log(1 - rng.next()) / ratePerMs;
      // Always through a timer, so that a run behind its schedule still lets the cell work.
      await clock.sleep(Math.max(0, at - clock.now()));
    }
    await Promise.all(submits);
    await sample();
    const finished = mgr.stats.finished;
    const result: Run = {
      mode: on ? 'retention on' : 'retention off',
      submitted: i,
      finished,
      deletedJobs: hk?.retention.totals.jobs ?? 0,
      deletedRequests: hk?.retention.totals.requests ?? 0,
      compactions: hk?.stats.compactions ?? 0,
      samples,
      afterDefrag: { dbSize: 0, dbInUse: 0 },
    };
    await hk?.close();
    await mgr.close();
    await Promise.all(monitors.map((m) => m.close()));
    await admin.maintenance.defragment();
    const st = await admin.maintenance.status();
    result.afterDefrag = { dbSize: Number(st.dbSize), dbInUse: Number(st.dbSizeInUse) };
    return result;
  } finally {
    await store.close();
    admin.close();
    await etcd.stop();
  }
}

const runs = [await run(true), await run(false)];
const table = (r: Run): string =>
  mdTable(
    ['t s', 'keys', 'jobs stored', 'revision', 'compacted to', 'etcd DB MiB', 'DB in use MiB'],
    r.samples.map((s) => [s.t, s.keys, s.jobs, s.revision, s.compacted || '-', MiB(s.dbSize), MiB(s.dbInUse)]),
  );
const summary = mdTable(
  [
    'mode',
    'jobs submitted',
    'jobs finished',
    'jobs deleted',
    'request ids deleted',
    'compactions',
    'keys at the end',
    'DB MiB at the end',
    'in use',
    'after one defrag',
  ],
  runs.map((r) => {
    const last = r.samples[r.samples.length - 1];
    return [
      r.mode,
      r.submitted,
      r.finished,
      r.deletedJobs,
      r.deletedRequests,
      r.compactions,
      last?.keys ?? 0,
      MiB(last?.dbSize ?? 0),
      MiB(last?.dbInUse ?? 0),
      MiB(r.afterDefrag.dbSize),
    ];
  }),
);
const md = `# Retention and compaction: key count and etcd DB size under load

${SERVERS} simulated servers × ${RUS} RUs, one job manager with 3 agents, 2-task jobs of ${TASK_MS / 1000} s each
submitted with a request id, Poisson arrivals at ${LOAD * 100}% load, for ${RUN_MS / 1000} s, on a fresh
single-member etcd each run (same machine: ${machine()}). "Retention on": a housekeeper with
\`--retain ${RETAIN_MS / 1000}s\` (swept every 2 s; request ids kept ${REQUEST_RETAIN_MS / 1000} s after their request here, where
the command line keeps them at least 10 min) and compaction to the revision of ${MARGIN_MS / 1000} s ago (sampled every 5 s). "Retention off":
what tarcil did before: nothing is ever deleted or compacted.

${summary}

## Retention on

${table(runs[0] as Run)}

## Retention off

${table(runs[1] as Run)}

With retention on, the keys level off after the first retention period (finished jobs of the last
${RETAIN_MS / 1000} s plus the sweep period, the running ones, and request ids of the last ${REQUEST_RETAIN_MS / 1000} s); with retention off
every key stays. The DB in use grows far more slowly with compaction than without, but in a run
of minutes it still grows: compaction keeps the last ${MARGIN_MS / 1000} s of history, whose size follows the write
rate, and etcd's pages are reused, not returned. The allocated DB size only shrinks with a defrag
(\`etcdctl defrag\`). A run of a few minutes does not show the level the size settles at; the soak
benchmark runs for longer.

Reproduce: \`npx tsx bench/retention.ts\`${quick ? ' (this run: --quick)' : ''}.
`;
const paths = writeResults(
  'retention',
  { machine: machine(), quick, servers: SERVERS, rus: RUS, load: LOAD, retainMs: RETAIN_MS, marginMs: MARGIN_MS, runs },
  md,
  resultsDir(quick, 'retention'),
);
process.stdout.write(`${summary}\nwrote ${paths.join(', ')}\n`);
clearInterval(keepAlive);
