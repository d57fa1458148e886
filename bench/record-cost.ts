/**
 * What a task costs the store once it is decided: write transactions, key writes and watch
 * deliveries, per job and per task, by record kind (jobs/, tasks/, rus/, owners/, …).
 *
 * A real etcd, one `tarcil hollow` process (--servers nodes of `hollow-10k`, 16 RUs each) and
 * --front-ends `tarcil server` processes with --agents agents each, as the soak runs them, without
 * its auditor. Three phases, each measured on its own:
 *   1. --jobs one-task jobs, one at a time (each submitted once the one before is final);
 *   2. --jobs 20-task jobs, one at a time;
 *   3. the soak's mix of job sizes (1–128 tasks, 11.2 on average), --mix-jobs jobs submitted
 *      --mix-rate a second, all waited for.
 * Tasks run --task-ms each; the mix's sizes are drawn from --seed. Counted:
 *   - writes: a watch of the whole cell's prefix kept by this process: each event is one key
 *     written (put or delete), each distinct revision one write transaction;
 *   - deliveries: every tarcil process's `tarcil_store_watch_events_total{kind}` (events etcd sent
 *     its watches), summed, and etcd's own `etcd_debugging_mvcc_events_total` (events sent to every
 *     watcher) less this process's watch, as the check of the sum;
 *   - CPU: each process's CPU time (/proc) over the phase, per task: etcd, the front-ends, the
 *     hollow nodes (this process's own is left out). Each job is waited for by asking for it every
 *     --poll-ms (500): each ask is a GetJob and a read of etcd, counted in the front-ends' CPU and
 *     reads (every 50 ms, as runs before `--poll-ms` did, they were most of both).
 *
 * Run: npx tsx bench/record-cost.ts [--servers 200] [--front-ends 3] [--agents 4] [--jobs 40]
 *      [--mix-jobs 150] [--mix-rate 5] [--task-ms 500] [--seed 1] [--poll-ms 500] [--name record-cost]
 * Results: bench/results/record-cost/<name>.{md,json}.
 */
import { execFileSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { join } from 'node:path';
import { schedulerClient } from '../src/cli/grpc-clients.ts';
import type { SchedulerClient } from '../src/rpc/gen/tarcil/v1/Scheduler.ts';
import { loadCatalog } from '../src/model/catalog.ts';
import { openStore } from '../src/store/index.ts';
import { ensureEtcd, startEtcd } from '../test/support/etcd.ts';
import { submit, waitFinal } from '../test/support/live.ts';
import { tarcil, type TarcilProc } from '../test/support/procs.ts';
import { SeededRng } from '../src/util/rng.ts';
import { pickSize } from './lib/jobs.ts';
import { cpuSeconds } from './lib/proc-stats.ts';
import { mdTable } from './lib/report.ts';

function flag(name: string, dflt: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 && process.argv[i + 1] !== undefined ? (process.argv[i + 1] as string) : dflt;
}

const SERVERS = Number(flag('servers', '200'));
const FRONT_ENDS = Number(flag('front-ends', '3'));
const AGENTS = Number(flag('agents', '4'));
const JOBS = Number(flag('jobs', '40'));
const MIX_JOBS = Number(flag('mix-jobs', '150'));
const MIX_RATE = Number(flag('mix-rate', '5'));
const TASK_MS = Number(flag('task-ms', '500'));
const NAME = flag('name', 'record-cost');
const SEED = Number(flag('seed', '1'));
const POLL_MS = Number(flag('poll-ms', '500'));
const PREFIX = '/tarcil/cost/';
const OUT = join(import.meta.dirname, 'results', 'record-cost');

const say = (m: string): void => void process.stderr.write(`[record-cost] ${m}\n`);
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

function commit(): string {
  try {
    const head = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { encoding: 'utf8' }).trim();
    const dirty = execFileSync('git', ['status', '--porcelain', '--', 'src'], { encoding: 'utf8' }).trim() !== '';
    return dirty ? `${head}+changes` : head;
  } catch {
    return 'unknown';
  }
}

async function scrape(port: number): Promise<string> {
  return (await fetch(`http://127.0.0.1:${port}/metrics`, { signal: AbortSignal.timeout(10_000) })).text();
}

/** Samples of one metric by the value of one label (`kind`), or by '' when it has none. */
function byLabel(text: string, name: string, label = 'kind'): Map<string, number> {
  const out = new Map<string, number>();
  for (const line of text.split('\n')) {
    if (line.startsWith('#') || !line.startsWith(name) || (line[name.length] !== ' ' && line[name.length] !== '{')) continue;
    const m = new RegExp(`${label}="([^"]*)"`).exec(line);
    const k = m?.[1] ?? '';
    out.set(k, (out.get(k) ?? 0) + Number(line.split(' ').pop()));
  }
  return out;
}

const add = (a: Map<string, number>, b: Map<string, number>, sign = 1): Map<string, number> => {
  const out = new Map(a);
  for (const [k, v] of b) out.set(k, (out.get(k) ?? 0) + sign * v);
  return out;
};
const total = (m: Map<string, number>): number => [...m.values()].reduce((s, v) => s + v, 0);

interface Counts {
  keys: Map<string, number>;
  txns: number;
  deliveries: Map<string, number>;
  etcdEvents: number;
  /** Requests each process sent to etcd, by `<process> <kind>` (read, write). */
  requests: Map<string, number>;
}

interface PhaseResult {
  phase: string;
  jobs: number;
  tasks: number;
  txnsPerJob: number;
  keysPerJob: number;
  deliveriesPerJob: number;
  keysPerTask: number;
  deliveriesPerTask: number;
  etcdDeliveriesPerTask: number;
  /** CPU ms per task of each process (etcd, front-ends, hollow) and all of them together. */
  cpuMsPerTask: Record<string, number>;
  keysByKind: Record<string, number>;
  deliveriesByKind: Record<string, number>;
  /** Requests to etcd per task: hollow and front-ends, reads and writes. */
  requestsPerTask: Record<string, number>;
}

async function main(): Promise<void> {
  const etcd = await startEtcd({ bin: ensureEtcd(say), extraArgs: ['--quota-backend-bytes', '8589934592'] });
  const url = `etcd://127.0.0.1:${etcd.clientPort}`;
  const children: TarcilProc[] = [];
  const clients: SchedulerClient[] = [];
  const store = await openStore(url);
  try {
    const hollow = tarcil([
      'hollow',
      '--store',
      url,
      '--prefix',
      PREFIX,
      '--servers',
      String(SERVERS),
      '--cluster',
      'hollow-10k',
      '--lease-ttl',
      '10',
      '--metrics-port',
      '0',
    ]);
    children.push(hollow);
    const ready = await hollow.waitFor(/tarcil hollow: (\d+) nodes .*?, (\d+) RUs.*metrics on :(\d+)/, 300_000);
    const metricsPorts = [Number(ready[3])];
    const pids: [string, number][] = [['hollow', hollow.child.pid ?? 0]];
    for (let i = 0; i < FRONT_ENDS; i++) {
      const fe = tarcil(['server', '--store', url, '--prefix', PREFIX, '--agents', String(AGENTS), '--port', '0', '--metrics-port', '0', '--name', `fe${i}`]);
      children.push(fe);
      pids.push([`fe${i}`, fe.child.pid ?? 0]);
      const m = await fe.waitFor(/listening on [^:]+:(\d+), metrics on :(\d+)/, 120_000);
      clients.push(schedulerClient(`127.0.0.1:${m[1]}`));
      metricsPorts.push(Number(m[2]));
    }
    const etcdPid = Number(
      execFileSync('pgrep', ['-f', '--', `--data-dir ${etcd.dataDir}`])
        .toString()
        .trim()
        .split('\n')[0],
    );
    pids.push(['etcd', etcdPid]);
    const cpu = (): Map<string, number> => new Map(pids.map(([n, pid]) => [n, cpuSeconds(pid)]));
    say(`${SERVERS} hollow nodes (${ready[2]} RUs), ${FRONT_ENDS} front-ends × ${AGENTS} agents`);
    await sleep(3000);

    // This process's watch of the whole cell: the keys written, by kind, and the write transactions.
    const keys = new Map<string, number>();
    const revisions = new Set<number>();
    const w = await store.watch({
      prefix: PREFIX,
      fromRevision: (await store.revision()) + 1,
      onEvents: (b) => {
        revisions.add(b.revision);
        for (const ev of b.events) {
          const kind = ev.kv.key.slice(PREFIX.length).split('/')[0] ?? '';
          keys.set(kind, (keys.get(kind) ?? 0) + 1);
        }
      },
      onError: (e) => say(`watch ended: ${e.message}`),
    });
    const etcdMetrics = async (): Promise<number> =>
      total(byLabel(await (await fetch(`http://127.0.0.1:${etcd.clientPort}/metrics`)).text(), 'etcd_debugging_mvcc_events_total'));
    const counts = async (): Promise<Counts> => {
      // Let every watch catch up with the last write.
      await sleep(1500);
      let deliveries = new Map<string, number>();
      const requests = new Map<string, number>();
      for (const [i, p] of metricsPorts.entries()) {
        const text = await scrape(p);
        deliveries = add(deliveries, byLabel(text, 'tarcil_store_watch_events_total'));
        // The hollow process first, then the front-ends.
        const who = i === 0 ? 'hollow' : 'front-ends';
        for (const [kind, n] of byLabel(text, 'tarcil_store_request_seconds_count')) requests.set(`${who} ${kind}`, (requests.get(`${who} ${kind}`) ?? 0) + n);
      }
      const out = { keys: new Map(keys), txns: revisions.size, deliveries, etcdEvents: await etcdMetrics(), requests };
      return out;
    };

    const catalog = loadCatalog();
    const profiles = [...catalog.workloads.keys()];
    let seq = 0;
    let rr = 0;
    const runJob = async (tasks: number): Promise<void> => {
      const c = clients[rr++ % clients.length] as SchedulerClient;
      const spec = { name: `cost-${++seq}`, profile: profiles[seq % profiles.length], tasks, durationMs: TASK_MS };
      const { jobId } = await submit(c, { specJson: JSON.stringify(spec), requestId: randomUUID() });
      const job = await waitFinal(c, jobId, 120_000, POLL_MS);
      if (job.state !== 'succeeded') throw new Error(`job ${jobId} ended ${job.state}: ${job.message}`);
    };

    const results: PhaseResult[] = [];
    const phase = async (name: string, run: () => Promise<{ jobs: number; tasks: number }>): Promise<void> => {
      const before = await counts();
      const ownBefore = total(keys);
      const cpuBefore = cpu();
      const { jobs, tasks } = await run();
      const after = await counts();
      const cpuUsed = add(cpu(), cpuBefore, -1);
      const k = add(after.keys, before.keys, -1);
      const d = add(after.deliveries, before.deliveries, -1);
      // etcd's count includes this process's own watch: one event per key written.
      const etcdDeliveries = after.etcdEvents - before.etcdEvents - (total(keys) - ownBefore);
      const r: PhaseResult = {
        phase: name,
        jobs,
        tasks,
        txnsPerJob: (after.txns - before.txns) / jobs,
        keysPerJob: total(k) / jobs,
        deliveriesPerJob: total(d) / jobs,
        keysPerTask: total(k) / tasks,
        deliveriesPerTask: total(d) / tasks,
        etcdDeliveriesPerTask: etcdDeliveries / tasks,
        keysByKind: Object.fromEntries([...k].filter(([, v]) => v > 0).map(([kind, v]) => [kind, v / tasks])),
        deliveriesByKind: Object.fromEntries([...d].filter(([, v]) => v > 0).map(([kind, v]) => [kind, v / tasks])),
        requestsPerTask: Object.fromEntries([...add(after.requests, before.requests, -1)].map(([k2, v]) => [k2, v / tasks])),
        cpuMsPerTask: {
          etcd: ((cpuUsed.get('etcd') ?? 0) * 1000) / tasks,
          'front-ends': ([...cpuUsed].filter(([n]) => n.startsWith('fe')).reduce((a, [, v]) => a + v, 0) * 1000) / tasks,
          hollow: ((cpuUsed.get('hollow') ?? 0) * 1000) / tasks,
          all: (total(cpuUsed) * 1000) / tasks,
        },
      };
      results.push(r);
      say(
        `${name}: ${jobs} jobs, ${tasks} tasks: ${r.txnsPerJob.toFixed(1)} txns, ${r.keysPerJob.toFixed(1)} keys, ${r.deliveriesPerJob.toFixed(1)} deliveries a job; ${r.keysPerTask.toFixed(2)} keys, ${r.deliveriesPerTask.toFixed(2)} deliveries a task (etcd: ${r.etcdDeliveriesPerTask.toFixed(2)})`,
      );
    };

    await phase('1-task jobs, one at a time', async () => {
      for (let i = 0; i < JOBS; i++) await runJob(1);
      return { jobs: JOBS, tasks: JOBS };
    });
    await phase('20-task jobs, one at a time', async () => {
      for (let i = 0; i < JOBS; i++) await runJob(20);
      return { jobs: JOBS, tasks: 20 * JOBS };
    });
    await phase(`the soak's mix, ${MIX_RATE} jobs/s`, async () => {
      const rng = new SeededRng(SEED);
      const sizes = Array.from({ length: MIX_JOBS }, () => pickSize(rng.next()));
      const running: Promise<void>[] = [];
      for (const n of sizes) {
        running.push(runJob(n));
        await sleep(1000 / MIX_RATE);
      }
      await Promise.all(running);
      return { jobs: MIX_JOBS, tasks: sizes.reduce((a, b) => a + b, 0) };
    });
    await w.close();

    const kinds = [...new Set(results.flatMap((r) => [...Object.keys(r.keysByKind), ...Object.keys(r.deliveriesByKind)]))].sort();
    const f = (v: number | undefined, d = 2): string => (v === undefined ? '–' : v.toFixed(d));
    const md = [
      `# What a task costs the store (${NAME})`,
      '',
      `Commit ${commit()}, ${new Date().toISOString()}. ${SERVERS} hollow nodes of hollow-10k, ${FRONT_ENDS} front-ends × ${AGENTS} agents, tasks of ${TASK_MS} ms, each job asked for every ${POLL_MS} ms until final; etcd on loopback, no auditor.`,
      `Command: \`npx tsx bench/record-cost.ts ${process.argv.slice(2).join(' ')}\`. Load average when it ended: ${loadavg()
        .map((l) => l.toFixed(2))
        .join(', ')} (2 cores).`,
      '',
      mdTable(
        [
          'phase',
          'jobs',
          'tasks',
          'write txns / job',
          'keys written / job',
          'deliveries / job',
          'keys written / task',
          'deliveries / task',
          'etcd: events sent / task',
        ],
        results.map((r) => [
          r.phase,
          String(r.jobs),
          String(r.tasks),
          f(r.txnsPerJob, 1),
          f(r.keysPerJob, 1),
          f(r.deliveriesPerJob, 1),
          f(r.keysPerTask),
          f(r.deliveriesPerTask),
          f(r.etcdDeliveriesPerTask),
        ]),
      ),
      '',
      'CPU per task (ms, user + system, over each phase; the phases wait for each job, so this includes idle upkeep: leases, timers):',
      '',
      mdTable(
        ['phase', 'etcd', 'front-ends', 'hollow nodes', 'all'],
        results.map((r) => [r.phase, f(r.cpuMsPerTask['etcd']), f(r.cpuMsPerTask['front-ends']), f(r.cpuMsPerTask['hollow']), f(r.cpuMsPerTask['all'])]),
      ),
      '',
      'Requests to etcd per task, as each process counts them (`tarcil_store_request_seconds`; writes: transactions, puts, deletes; reads: gets, ranges, read-only transactions):',
      '',
      mdTable(
        ['phase', 'front-ends: writes', 'front-ends: reads', 'hollow nodes: writes', 'hollow nodes: reads'],
        results.map((r) => [
          r.phase,
          f(r.requestsPerTask['front-ends write']),
          f(r.requestsPerTask['front-ends read']),
          f(r.requestsPerTask['hollow write']),
          f(r.requestsPerTask['hollow read']),
        ]),
      ),
      '',
      'Per task, by record kind (keys written / deliveries):',
      '',
      mdTable(
        ['kind', ...results.map((r) => r.phase)],
        kinds.map((k) => [`${k}/`, ...results.map((r) => `${f(r.keysByKind[k])} / ${f(r.deliveriesByKind[k])}`)]),
      ),
      '',
    ].join('\n');
    mkdirSync(OUT, { recursive: true });
    writeFileSync(join(OUT, `${NAME}.md`), md);
    writeFileSync(
      join(OUT, `${NAME}.json`),
      `${JSON.stringify({ commit: commit(), servers: SERVERS, frontEnds: FRONT_ENDS, agents: AGENTS, taskMs: TASK_MS, results }, null, 2)}\n`,
    );
    process.stdout.write(`${md}\n`);
  } finally {
    for (const c of clients) c.close();
    await store.close();
    await Promise.all(children.map((c) => c.kill()));
    await etcd.stop();
  }
}

await main();
