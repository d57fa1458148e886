/**
 * Fair share on a live cell: `tarcil up` (the demo cell: 24 RUs, simulated executor, 3 agents,
 * embedded store) started as its own process, two namespaces of equal weight, `a` offering 120%
 * of the cell from the start and `b` a tenth of that (12%) from `--b-start` on, both for
 * `--seconds`. Each job has 2 tasks of 1 s. Three runs: fair share on (the default), off
 * (`tarcil up --agent fairShare=false`), and `b` alone.
 *
 * Reported for each namespace: the wait of its jobs (submission to the start of its last task,
 * from the front-end's own records: submitted_at_ms and each task's started_at_ms), p50, p99 and
 * max; and the mean share of the cell's RUs each held while both submitted (ListNamespaces
 * every 500 ms).
 *
 * Run: npx tsx bench/fairshare-live.ts [--seconds 40] [--b-start 10]
 * Results: bench/results/fairshare-live/fairshare-live.{json,md}.
 */
import { spawnSync } from 'node:child_process';
import os from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type * as grpc from '@grpc/grpc-js';
import { schedulerClient } from '../src/cli/grpc-clients.ts';
import type { Job__Output } from '../src/rpc/gen/tarcil/v1/Job.ts';
import type { ListNamespacesResponse__Output } from '../src/rpc/gen/tarcil/v1/ListNamespacesResponse.ts';
import { fmt, machine, mdTable, pct, resultsDir, writeResults } from './lib/report.ts';
import { startUp } from './lib/up.ts';

const SELF = fileURLToPath(import.meta.url);
const ROOT = join(SELF, '..', '..');
const RUS = 24;
const TASKS = 2;
const TASK_MS = 1000;
const FINAL = new Set(['succeeded', 'failed', 'cancelled']);

const arg = (name: string): string | undefined => {
  const i = process.argv.indexOf(name);
  return i >= 0 ? process.argv[i + 1] : undefined;
};

interface NsResult {
  jobs: number;
  waitP50ms: number;
  waitP99ms: number;
  waitMaxms: number;
  /** Mean share of the cell's RUs held while both namespaces submitted. */
  heldShare: number;
}

interface Run {
  label: string;
  fairShare: boolean;
  a?: NsResult;
  b: NsResult;
  unfinished: number;
}

function call<Res>(f: (opts: grpc.CallOptions, cb: (e: grpc.ServiceError | null, r?: Res) => void) => void): Promise<Res> {
  return new Promise((resolve, reject) => f({ deadline: Date.now() + 10_000 }, (e, r) => (e || !r ? reject(e ?? new Error('empty')) : resolve(r))));
}

/** One run: a at 120% from 0 (unless alone), b at 12% from bStart, both until `seconds`. */
async function run(label: string, o: { fairShare: boolean; withA: boolean; seconds: number; bStart: number }): Promise<Run> {
  const up = await startUp(o.fairShare ? [] : ['--agent', 'fairShare=false']);
  const client = schedulerClient(`127.0.0.1:${up.port}`);
  const stop = async (): Promise<void> => {
    client.close();
    await up.stop();
  };
  try {
    for (const name of ['a', 'b']) await call((opts, cb) => client.PutNamespace({ name }, opts, cb));
    const ids: Record<'a' | 'b', string[]> = { a: [], b: [] };
    const submitJob = async (ns: 'a' | 'b', i: number): Promise<void> => {
      const spec = JSON.stringify({ name: `${ns}-${i}`, profile: 'spark-lr', tasks: TASKS, durationMs: TASK_MS });
      const r = await call<{ jobId: string }>((opts, cb) => client.SubmitJob({ specJson: spec, namespace: ns }, opts, cb));
      ids[ns].push(r.jobId);
    };
    // Jobs per second: the cell runs RUS / TASKS jobs of TASK_MS a second.
    const full = (RUS / TASKS) * (1000 / TASK_MS);
    const streams: { ns: 'a' | 'b'; rate: number; from: number }[] = [{ ns: 'b', rate: 0.12 * full, from: o.bStart * 1000 }];
    if (o.withA) streams.push({ ns: 'a', rate: 1.2 * full, from: 0 });
    const t0 = Date.now();
    const held: { t: number; a: number; b: number }[] = [];
    let sampling = true;
    const sampler = (async () => {
      while (sampling) {
        const res = await call<ListNamespacesResponse__Output>((opts, cb) => client.ListNamespaces({}, opts, cb)).catch(() => undefined);
        if (res)
          held.push({
            t: Date.now() - t0,
            a: res.namespaces.find((n) => n.name === 'a')?.rusInUse ?? 0,
            b: res.namespaces.find((n) => n.name === 'b')?.rusInUse ?? 0,
          });
        await new Promise((r) => setTimeout(r, 500));
      }
    })();
    const pending: Promise<void>[] = [];
    await Promise.all(
      streams.map(async (s) => {
        const n = Math.floor(((o.seconds * 1000 - s.from) / 1000) * s.rate);
        for (let i = 0; i < n; i++) {
          const at = t0 + s.from + (i * 1000) / s.rate;
          const wait = at - Date.now();
          if (wait > 0) await new Promise((r) => setTimeout(r, wait));
          pending.push(submitJob(s.ns, i));
        }
      }),
    );
    await Promise.all(pending);
    // Drain: every job final, within a bound.
    const deadline = Date.now() + 180_000;
    const jobs = new Map<string, Job__Output>();
    for (const id of [...ids.a, ...ids.b]) {
      for (;;) {
        const j = await call<Job__Output>((opts, cb) => client.GetJob({ jobId: id }, opts, cb));
        if (FINAL.has(j.state) || Date.now() > deadline) {
          jobs.set(id, j);
          break;
        }
        await new Promise((r) => setTimeout(r, 200));
      }
    }
    sampling = false;
    await sampler;
    const waitOf = (j: Job__Output): number => Math.max(...j.taskList.map((t) => Number(t.startedAtMs))) - Number(j.submittedAtMs);
    const contention = held.filter((h) => h.t >= o.bStart * 1000 && h.t <= o.seconds * 1000);
    const ns = (name: 'a' | 'b'): NsResult => {
      const waits = ids[name]
        .map((id) => jobs.get(id) as Job__Output)
        .filter((j) => j.state === 'succeeded')
        .map(waitOf);
      const share = contention.length > 0 ? contention.reduce((s, h) => s + h[name], 0) / contention.length / RUS : 0;
      return { jobs: ids[name].length, waitP50ms: pct(waits, 0.5), waitP99ms: pct(waits, 0.99), waitMaxms: Math.max(...waits), heldShare: share };
    };
    const b = ns('b');
    return {
      label,
      fairShare: o.fairShare,
      ...(o.withA ? { a: ns('a') } : {}),
      b,
      unfinished: [...jobs.values()].filter((j) => !FINAL.has(j.state)).length,
    };
  } finally {
    await stop();
  }
}

async function main(): Promise<void> {
  const seconds = Number(arg('--seconds') ?? 40);
  const bStart = Number(arg('--b-start') ?? 10);
  const t0 = performance.now();
  const loadAvg = os.loadavg()[0] as number;
  const runs: Run[] = [];
  runs.push(await run('fair share (default)', { fairShare: true, withA: true, seconds, bStart }));
  runs.push(await run('no fair share (--agent fairShare=false)', { fairShare: false, withA: true, seconds, bStart }));
  runs.push(await run('b alone', { fairShare: true, withA: false, seconds, bStart }));
  const commit = spawnSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: ROOT, encoding: 'utf8' }).stdout.trim();
  const ms = (x: number | undefined): string => (x === undefined || !Number.isFinite(x) ? '-' : x >= 10_000 ? `${fmt(x / 1000)} s` : `${Math.round(x)} ms`);
  const md = [
    '# Fair share on `tarcil up` (`bench/fairshare-live.ts`)',
    '',
    `Commit ${commit}, ${machine()}, load average ${loadAvg.toFixed(1)} at the start; ${fmt((performance.now() - t0) / 1000)} s in all.`,
    '',
    `The demo cell (${RUS} RUs, simulated executor, 3 agents, embedded store) as \`tarcil up\` runs it. Namespaces \`a\` and \`b\`, weight 1 each. Jobs of ${TASKS} tasks of ${TASK_MS} ms. \`a\` offers 120% of the cell from 0 s, \`b\` 12% from ${bStart} s; both stop submitting at ${seconds} s. Wait: submission to the start of the job's last task (the front-end's records). Held: mean share of the cell's RUs from ${bStart} s to ${seconds} s.`,
    '',
    mdTable(
      ['run', 'b jobs', 'b wait p50', 'b wait p99', 'b wait max', 'a jobs', 'a wait p50', 'a wait p99', 'a holds', 'b holds', 'jobs not final'],
      runs.map((r) => [
        r.label,
        r.b.jobs,
        ms(r.b.waitP50ms),
        ms(r.b.waitP99ms),
        ms(r.b.waitMaxms),
        r.a?.jobs ?? '-',
        ms(r.a?.waitP50ms),
        ms(r.a?.waitP99ms),
        r.a ? `${fmt(100 * r.a.heldShare)}%` : '-',
        `${fmt(100 * r.b.heldShare)}%`,
        r.unfinished,
      ]),
    ),
    '',
  ].join('\n');
  writeResults('fairshare-live', { commit, loadAvg, seconds, bStart, runs }, md, resultsDir(false, 'fairshare-live'));
  process.stdout.write(`${md}\n`);
}

await main();
