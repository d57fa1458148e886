/**
 * A backlog on `tarcil up`: 50 concurrent submitters each submit 10 jobs of 10 tasks of 50 ms, one
 * after the other without waiting for them to run, to `tarcil up` (the demo cell: 10 monitors, 24
 * RUs, simulated executor, 3 agents, embedded store) started as its own process, exactly as `npm
 * start` runs it. Each submitter follows each of its jobs with a WatchJob stream (as `tarcil
 * submit --wait` does) until the job is final. The cell can run at most 24 RUs / 50 ms = 480
 * tasks/s, so 5,000 tasks take at least 10.4 s.
 *
 * Reported: tasks/s from the first submission to the last job's end, as a fraction of that
 * capacity; SubmitJob RPC latency p50/p99 (client side); the front-end process's CPU time (from
 * /proc: user + system, monitors included, as they share the process) per task; its RSS before,
 * at its peak (sampled every 50 ms) and 5 s after the backlog drained.
 *
 * With `--viewers N`, N dashboard clients follow the front-end's live feed (/events, as N open
 * browser tabs do) for the whole backlog, and also open the page of a job every second: what the
 * dashboard costs the scheduler on a busy cell (compare with `--viewers 0`, the dashboard served
 * but not looked at).
 *
 * Run: npx tsx bench/backlog.ts [--label after] [--cpu-prof DIR] [--submitters 50] [--jobs 10] [--tasks 10] [--viewers 0] (--render: the md from the json)
 * Results: bench/results/backlog/backlog.{json,md}; runs with other labels already there are kept (before
 * and after in one file).
 */
import * as grpc from '@grpc/grpc-js';
import { spawnSync } from 'node:child_process';
import http from 'node:http';
import { existsSync, readFileSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { schedulerClient } from '../src/cli/grpc-clients.ts';
import type { Job__Output } from '../src/rpc/gen/tarcil/v1/Job.ts';
import type { JobEvent__Output } from '../src/rpc/gen/tarcil/v1/JobEvent.ts';
import type { SchedulerClient } from '../src/rpc/gen/tarcil/v1/Scheduler.ts';
import type { SubmitJobResponse__Output } from '../src/rpc/gen/tarcil/v1/SubmitJobResponse.ts';
import { fmt, machine, mdTable, pct, RESULTS_DIR as ALL_RESULTS, writeResults } from './lib/report.ts';
import { startUp } from './lib/up.ts';

const RESULTS_DIR = join(ALL_RESULTS, 'backlog');

const SELF = fileURLToPath(import.meta.url);
const ROOT = join(SELF, '..', '..');
const RUS = 24;
const TASK_MS = 50;
const FINAL = new Set(['succeeded', 'failed', 'cancelled']);

interface Result {
  label: string;
  commit: string;
  when: string;
  machine: string;
  /** The machine's 1-minute load average when the run began (the machine is shared). */
  loadAvg?: number;
  submitters: number;
  jobsPerSubmitter: number;
  tasksPerJob: number;
  tasks: number;
  seconds: number;
  tasksPerSec: number;
  capacity: number;
  submitP50ms: number;
  submitP99ms: number;
  submitMaxMs: number;
  cpuSeconds: number;
  cpuMsPerTask: number;
  rssStartMb: number;
  rssPeakMb: number;
  rssAfterMb: number;
  failedJobs: number;
  /** Dashboard clients following the live feed during the backlog, and the bytes they received. */
  viewers?: number;
  viewerBytes?: number;
  /** Mean run time of a task (start to end, as its monitor recorded them): 50 ms × slowdown / platform speed. */
  meanRunMs: number;
  /** Share of the 24 RUs' time between the first submission and the last end spent running tasks. */
  runningShare: number;
}

/**
 * `n` dashboard clients: each follows /events and fetches the page data of the latest job every
 * second. stop() ends them and returns the bytes they received.
 */
function dashboardViewers(port: number, n: number, ids: readonly string[]): { stop(): number } {
  let bytes = 0;
  const reqs: http.ClientRequest[] = [];
  const timers: NodeJS.Timeout[] = [];
  const read = (res: http.IncomingMessage): void => {
    res.on('data', (b: Buffer) => (bytes += b.length));
    res.on('error', () => undefined);
  };
  for (let i = 0; i < n; i++) {
    const req = http.get({ host: '127.0.0.1', port, path: '/events' }, read);
    req.on('error', () => undefined);
    reqs.push(req);
    timers.push(
      setInterval(() => {
        const id = ids[ids.length - 1];
        if (!id) return;
        http.get({ host: '127.0.0.1', port, path: `/api/job?id=${encodeURIComponent(id)}` }, read).on('error', () => undefined);
      }, 1000),
    );
  }
  return {
    stop: () => {
      for (const t of timers) clearInterval(t);
      for (const r of reqs) r.destroy();
      return bytes;
    },
  };
}

function procStat(pid: number): { cpuS: number; rssMb: number } {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const ticks = Number(f[11]) + Number(f[12]);
  const rssPages = Number(f[21]);
  return { cpuS: ticks / 100, rssMb: (rssPages * 4096) / 2 ** 20 };
}

function submit(c: SchedulerClient, spec: object): Promise<SubmitJobResponse__Output> {
  return new Promise((resolve, reject) => {
    c.SubmitJob({ specJson: JSON.stringify(spec) }, { deadline: new Date(Date.now() + 60_000) }, (err, res) =>
      err || !res ? reject(err ?? new Error('empty answer')) : resolve(res),
    );
  });
}

function getJob(c: SchedulerClient, jobId: string): Promise<Job__Output> {
  return new Promise((resolve, reject) => {
    c.GetJob({ jobId }, { deadline: new Date(Date.now() + 30_000) }, (err, res) => (err || !res ? reject(err ?? new Error('empty answer')) : resolve(res)));
  });
}

function watchUntilFinal(c: SchedulerClient, jobId: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const stream = c.WatchJob({ jobId });
    let done = false;
    stream.on('data', (ev: JobEvent__Output) => {
      const st = ev.job?.state ?? '';
      if (!done && FINAL.has(st)) {
        done = true;
        stream.cancel();
        resolve(st);
      }
    });
    stream.on('error', (err: grpc.ServiceError) => {
      if (!done && err.code !== grpc.status.CANCELLED) reject(err);
    });
    stream.on('end', () => {
      if (!done) reject(new Error(`watch of ${jobId} ended before the job did`));
    });
  });
}

async function main(): Promise<void> {
  const argv = process.argv;
  const arg = (name: string): string | undefined => {
    const i = argv.indexOf(name);
    return i >= 0 ? argv[i + 1] : undefined;
  };
  const label = arg('--label') ?? 'after';
  const profDir = arg('--cpu-prof');
  const submitters = Number(arg('--submitters') ?? 50);
  const jobsPer = Number(arg('--jobs') ?? 10);
  const tasksPer = Number(arg('--tasks') ?? 10);
  const viewers = Number(arg('--viewers') ?? 0);
  const up = await startUp([], profDir ? ['--cpu-prof', '--cpu-prof-dir', profDir] : []);
  const { port, httpPort } = up;
  const pid = up.proc.pid as number;
  let peak = 0;
  try {
    const client = schedulerClient(`127.0.0.1:${port}`);
    // One warm-up job, so module loading and first-call costs are not counted.
    const warm = await submit(client, { name: 'warm', profile: 'spark-lr', tasks: 1, durationMs: TASK_MS });
    await watchUntilFinal(client, warm.jobId);
    await new Promise((r) => setTimeout(r, 1000));
    const start = procStat(pid);
    const sampler = setInterval(() => {
      try {
        peak = Math.max(peak, procStat(pid).rssMb);
      } catch {
        /* exited */
      }
    }, 50);
    const submitMs: number[] = [];
    const states: string[] = [];
    const ids: string[] = [];
    const watching = dashboardViewers(httpPort, viewers, ids);
    const t0 = performance.now();
    const clients = Array.from({ length: submitters }, () => schedulerClient(`127.0.0.1:${port}`));
    await Promise.all(
      clients.map(async (c, s) => {
        const watches: Promise<void>[] = [];
        for (let j = 0; j < jobsPer; j++) {
          const spec = { name: `backlog-${s}-${j}`, profile: 'spark-lr', tasks: tasksPer, durationMs: TASK_MS };
          const a = performance.now();
          const res = await submit(c, spec);
          ids.push(res.jobId);
          submitMs.push(performance.now() - a);
          watches.push(watchUntilFinal(c, res.jobId).then((st) => void states.push(st)));
        }
        await Promise.all(watches);
      }),
    );
    const seconds = (performance.now() - t0) / 1000;
    const end = procStat(pid);
    const viewerBytes = watching.stop();
    await new Promise((r) => setTimeout(r, 5000));
    clearInterval(sampler);
    const after = procStat(pid);
    let runMs = 0;
    let ran = 0;
    for (const id of ids) {
      for (const t of (await getJob(client, id)).taskList) {
        if (t.startedAtMs > 0 && t.endedAtMs >= t.startedAtMs) {
          runMs += t.endedAtMs - t.startedAtMs;
          ran++;
        }
      }
    }
    for (const c of clients) c.close();
    client.close();
    const tasks = submitters * jobsPer * tasksPer;
    const capacity = (RUS * 1000) / TASK_MS;
    const git = spawnSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: ROOT, encoding: 'utf8' });
    const r: Result = {
      label,
      commit: process.env.BENCH_COMMIT ?? (git.status === 0 ? git.stdout.trim() : ''),
      when: new Date().toISOString(),
      machine: machine(),
      loadAvg: os.loadavg()[0],
      submitters,
      jobsPerSubmitter: jobsPer,
      tasksPerJob: tasksPer,
      tasks,
      seconds,
      tasksPerSec: tasks / seconds,
      capacity,
      submitP50ms: pct(submitMs, 0.5),
      submitP99ms: pct(submitMs, 0.99),
      submitMaxMs: Math.max(...submitMs),
      cpuSeconds: end.cpuS - start.cpuS,
      cpuMsPerTask: ((end.cpuS - start.cpuS) * 1000) / tasks,
      rssStartMb: start.rssMb,
      rssPeakMb: peak,
      rssAfterMb: after.rssMb,
      failedJobs: states.filter((s) => s !== 'succeeded').length,
      viewers,
      viewerBytes,
      meanRunMs: runMs / Math.max(1, ran),
      runningShare: runMs / (RUS * seconds * 1000),
    };
    process.stdout.write(
      `${label}: ${fmt(r.tasksPerSec, 0)} tasks/s (${fmt((100 * r.tasksPerSec) / capacity, 0)}% of ${capacity}), submit p50 ${fmt(r.submitP50ms, 1)} ms p99 ${fmt(r.submitP99ms, 1)} ms, ` +
        `CPU ${fmt(r.cpuMsPerTask, 2)} ms/task, mean run ${fmt(r.meanRunMs, 1)} ms, RUs running ${fmt(100 * r.runningShare, 0)}%, RSS ${fmt(r.rssStartMb, 0)} → peak ${fmt(r.rssPeakMb, 0)} → ${fmt(r.rssAfterMb, 0)} MB, ${r.failedJobs} job(s) not succeeded\n`,
    );
    const jsonPath = join(RESULTS_DIR, 'backlog.json');
    const prior: Result[] = existsSync(jsonPath) ? ((JSON.parse(readFileSync(jsonPath, 'utf8')) as { runs: Result[] }).runs ?? []) : [];
    const runs = [...prior.filter((x) => x.label !== label), r];
    writeResults('backlog', { runs }, markdown(runs), RESULTS_DIR);
  } finally {
    await up.stop();
  }
}

function markdown(runs: Result[]): string {
  return [
    '# A 500-job backlog on `tarcil up` (`bench/backlog.ts`)',
    '',
    '50 concurrent submitters × 10 jobs × 10 tasks of 50 ms (spark-lr), each job followed by a WatchJob stream',
    'until final, against `tarcil up` (24 RUs, simulated executor, 3 agents, embedded store) in its own',
    'process. Capacity: 24 RUs / 50 ms = 480 tasks/s. CPU and RSS are those of the `tarcil up` process',
    '(front-end and the 10 monitors). Reproduce: `npx tsx bench/backlog.ts --label <name>`.',
    '',
    mdTable(
      [
        'run',
        'commit',
        'dashboard viewers',
        'tasks/s',
        '% of 480',
        'mean run ms',
        'RU time running %',
        'submit p50 ms',
        'submit p99 ms',
        'submit max ms',
        'CPU ms/task',
        'RSS start MB',
        'peak RSS MB',
        'RSS 5 s after MB',
        'jobs not succeeded',
      ],
      runs.map((r) => [
        r.label,
        r.commit,
        r.viewers === undefined ? '-' : `${r.viewers}${r.viewers ? ` (${fmt((r.viewerBytes ?? 0) / 1024, 0)} kB)` : ''}`,
        fmt(r.tasksPerSec, 0),
        fmt((100 * r.tasksPerSec) / r.capacity, 0),
        r.meanRunMs === undefined ? '-' : fmt(r.meanRunMs, 1),
        r.runningShare === undefined ? '-' : fmt(100 * r.runningShare, 0),
        fmt(r.submitP50ms, 1),
        fmt(r.submitP99ms, 1),
        fmt(r.submitMaxMs, 0),
        fmt(r.cpuMsPerTask, 2),
        fmt(r.rssStartMb, 0),
        fmt(r.rssPeakMb, 0),
        fmt(r.rssAfterMb, 0),
        r.failedJobs,
      ]),
    ),
    '',
    runs.map((r) => `- ${r.label}: ${r.machine}, ${r.when}${r.loadAvg !== undefined ? `, load average ${r.loadAvg.toFixed(1)} at the end` : ''}`).join('\n'),
    '',
  ].join('\n');
}

if (process.argv.includes('--render')) {
  // Rewrites the markdown from the json (after removing a run from it by hand).
  const { runs } = JSON.parse(readFileSync(join(RESULTS_DIR, 'backlog.json'), 'utf8')) as { runs: Result[] };
  writeResults('backlog', { runs }, markdown(runs), RESULTS_DIR);
} else await main();
