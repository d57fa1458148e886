/**
 * The client commands (submit, status, jobs, cluster, explain, cancel): calls to a front-end's
 * Scheduler service and their output. They load the gRPC client and nothing of the daemons.
 */
import type * as grpc from '@grpc/grpc-js';
import Table from 'cli-table3';
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { attemptLines } from '../frontend/convert.ts';
import { schedulerClient } from '../frontend/client.ts';
import { CLIENT_DEFAULTS } from '../frontend/options.ts';
import type { Cluster__Output } from '../frontend/gen/tarcil/v1/Cluster.ts';
import type { Explanation__Output } from '../frontend/gen/tarcil/v1/Explanation.ts';
import type { Job__Output } from '../frontend/gen/tarcil/v1/Job.ts';
import type { ListJobsResponse__Output } from '../frontend/gen/tarcil/v1/ListJobsResponse.ts';
import type { SubmitJobResponse__Output } from '../frontend/gen/tarcil/v1/SubmitJobResponse.ts';
import type { SchedulerClient } from '../frontend/gen/tarcil/v1/Scheduler.ts';
import { fmtRetain } from '../state/retention.ts';
import { invalid, TarcilError } from '../util/errors.ts';
import { EXIT, type ExitCode } from './exit-codes.ts';
import { nodeNotes } from './node-commands.ts';
import type { ProfileEstimate__Output } from '../frontend/gen/tarcil/v1/ProfileEstimate.ts';

export interface ClientFlags {
  server: string;
  tlsCa?: string;
  timeout: number;
}

function client(o: ClientFlags): SchedulerClient {
  return schedulerClient(o.server, o.tlsCa ? { caFile: o.tlsCa } : undefined);
}

function unary<Res>(o: ClientFlags, invoke: (opts: grpc.CallOptions, cb: grpc.requestCallback<Res>) => unknown): Promise<Res> {
  return new Promise((resolve, reject) => {
    invoke({ deadline: new Date(Date.now() + o.timeout) }, (err, res) => {
      if (err) reject(fromGrpc(err, o.server));
      else if (!res) reject(new TarcilError('INTERNAL', 'empty response'));
      else resolve(res);
    });
  });
}

/** A gRPC status as the project's error; one that says the front-end was not reached names the address dialled. */
function fromGrpc(err: grpc.ServiceError, server?: string): TarcilError {
  const names: Record<number, TarcilError['code']> = { 3: 'INVALID_ARGUMENT', 5: 'NOT_FOUND', 6: 'ALREADY_EXISTS', 8: 'RESOURCE_EXHAUSTED', 9: 'FAILED_PRECONDITION', 14: 'UNAVAILABLE', 4: 'DEADLINE_EXCEEDED', 1: 'CANCELLED' };
  const n = Number(err.code);
  const code = names[n] ?? 'INTERNAL';
  const hint = n === 14 || n === 4 ? ` (is \`tarcil up\` or \`tarcil server\` running${server ? ` at ${server}` : ''}? see --server or $TARCIL_SERVER)` : '';
  return new TarcilError(code, `${err.details || err.message}${hint}`);
}

function line(j: Job__Output): string {
  const counts = Object.entries(j.taskStates)
    .map(([k, v]) => `${v} ${k}`)
    .join(', ');
  const why = j.message ? `  — ${j.message}` : '';
  return `${j.id}  ${j.name}  ${j.state}  [${counts}]${j.rescheduled ? `  rescheduled ${j.rescheduled}` : ''}${why}`;
}

const TABLE_STYLE = process.stdout.isTTY ? {} : { head: [], border: [] };
const FINAL = new Set(['succeeded', 'failed', 'cancelled']);

/** The job spec's text: the file, or stdin for `-`. */
function readSpec(file: string): string {
  const stdin = file === '-';
  if (stdin && process.stdin.isTTY) process.stderr.write('reading the job spec from stdin (end it with Ctrl-D)\n');
  try {
    return readFileSync(stdin ? 0 : file, 'utf8');
  } catch (e) {
    const err = e as NodeJS.ErrnoException;
    throw invalid('<spec.json>', `cannot read ${stdin ? 'stdin' : `'${file}'`} (${err.code ?? err.message})`);
  }
}

/**
 * `tarcil submit`: the exit code is EXIT.OK once the job is accepted; with --wait, EXIT.OK if it
 * succeeded and EXIT.JOB_FAILED if it failed or was cancelled.
 */
export async function submitCommand(file: string, o: ClientFlags & { wait: boolean; requestId?: string; retries?: number }, out: (s: string) => void): Promise<ExitCode> {
  const text = readSpec(file);
  const requestId = o.requestId ?? randomUUID();
  const c = client(o);
  try {
    const res = await submitWithRetry(c, { specJson: text, requestId }, o);
    out(`submitted ${res.jobId}`);
    if (!o.wait) return EXIT.OK;
    return await new Promise<ExitCode>((resolve, reject) => {
      const stream = c.WatchJob({ jobId: res.jobId });
      const tty = process.stdout.isTTY;
      let last: Job__Output | undefined;
      stream.on('data', (ev: { job: Job__Output | null }) => {
        if (!ev.job) return;
        last = ev.job;
        const l = line(ev.job);
        if (tty) process.stdout.write(`\r\x1b[K${l}`);
        else out(l);
      });
      stream.on('error', (err: grpc.ServiceError) => reject(fromGrpc(err, o.server)));
      stream.on('end', () => {
        if (tty) process.stdout.write('\n');
        if (last?.state === 'succeeded') resolve(EXIT.OK);
        else if (last && FINAL.has(last.state)) resolve(EXIT.JOB_FAILED);
        else reject(new TarcilError('UNAVAILABLE', `the front-end at ${o.server} ended the watch of ${res.jobId} before the job ended (last seen ${last?.state ?? 'nothing'}); \`tarcil status ${res.jobId}\` shows it`));
      });
    });
  } finally {
    c.close();
  }
}

/**
 * SubmitJob, tried again on UNAVAILABLE or DEADLINE_EXCEEDED with the same request id: the first
 * attempt may have been persisted with only its answer lost, and the id makes the retry return
 * that job instead of creating another. RESOURCE_EXHAUSTED (a front-end's back-pressure: it holds
 * too many tasks not yet placed) is tried again too, after the same growing pause.
 */
export async function submitWithRetry(
  c: SchedulerClient,
  req: { specJson: string; requestId: string },
  o: { timeout: number; retries?: number; retryBaseMs?: number; server?: string },
): Promise<SubmitJobResponse__Output> {
  const retries = o.retries ?? CLIENT_DEFAULTS.submitRetries;
  let delay = o.retryBaseMs ?? CLIENT_DEFAULTS.retryBaseMs;
  for (let attempt = 0; ; attempt++) {
    try {
      return await new Promise<SubmitJobResponse__Output>((resolve, reject) => {
        c.SubmitJob(req, { deadline: new Date(Date.now() + o.timeout) }, (err, res) => {
          if (err) reject(err);
          else if (!res) reject(new TarcilError('INTERNAL', 'empty response'));
          else resolve(res);
        });
      });
    } catch (err) {
      const code = Number((err as Partial<grpc.ServiceError>).code);
      const transient = code === GRPC_UNAVAILABLE || code === GRPC_DEADLINE_EXCEEDED || code === GRPC_RESOURCE_EXHAUSTED;
      if (!transient || attempt >= retries) throw isServiceError(err) ? fromGrpc(err, o.server) : err;
      await new Promise((r) => setTimeout(r, delay / 2 + Math.random() * (delay / 2)));
      delay = Math.min(delay * 2, CLIENT_DEFAULTS.retryMaxMs);
    }
  }
}

const GRPC_DEADLINE_EXCEEDED = 4;
const GRPC_RESOURCE_EXHAUSTED = 8;
const GRPC_UNAVAILABLE = 14;

function isServiceError(e: unknown): e is grpc.ServiceError {
  return e instanceof Error && typeof (e as Partial<grpc.ServiceError>).code === 'number';
}

export async function statusCommand(id: string, o: ClientFlags & { json: boolean; tasksFrom?: number }, out: (s: string) => void): Promise<void> {
  const c = client(o);
  try {
    const j = await unary<Job__Output>(o, (opts, cb) => c.GetJob({ jobId: id, taskFrom: o.tasksFrom ?? 0 }, opts, cb));
    if (o.json) {
      out(JSON.stringify(j, null, 2));
      return;
    }
    out(line(j));
    out(`  profile ${j.profile}, ${j.tasks} tasks, priority ${j.priority}, ${j.mode}, owner ${j.owner || '-'}`);
    const t = new Table({ style: TABLE_STYLE, head: ['task', 'state', 'RU', 'attempt', 'ran ms', 'exit', 'message'] });
    for (const x of j.taskList) {
      const ran = x.startedAtMs && x.endedAtMs ? String(Math.round(x.endedAtMs - x.startedAtMs)) : '';
      t.push([x.index, x.state, x.ru ? `${x.ru.server}/${x.ru.index}` : '', x.attempt, ran, x.exitCode ?? '', (x.message || x.logPath).slice(0, 60)]);
    }
    out(t.toString());
    // tasks_omitted counts every record not on this page, below it (--tasks-from) and after it.
    if (j.nextTaskFrom > 0) out(`  ${j.tasksOmitted} task(s) with a record not on this page; the next page: tarcil status ${id} --tasks-from ${j.nextTaskFrom}`);
    else if (j.tasksOmitted > 0) out(`  ${j.tasksOmitted} task(s) with a record before this page not listed`);
    const again = j.taskList.filter((x) => x.previous.length > 0);
    if (again.length > 0) {
      out(`  placed more than once: ${again.length} task(s)`);
      for (const x of again) for (const l of attemptLines(x)) out(`  ${l}`);
    }
    for (const r of j.loadReports) out(`  load report: task ${r.task} on ${r.server} runs at ${(r.rate * 100).toFixed(0)}% of its expected rate`);
  } finally {
    c.close();
  }
}

export async function jobsCommand(o: ClientFlags & { state?: string[]; limit: number }, out: (s: string) => void): Promise<void> {
  const c = client(o);
  try {
    const res = await unary<ListJobsResponse__Output>(o, (opts, cb) => c.ListJobs({ states: o.state ?? [], limit: o.limit }, opts, cb));
    const t = new Table({ style: TABLE_STYLE, head: ['id', 'name', 'state', 'tasks', 'profile', 'submitted'] });
    for (const j of res.jobs) {
      const counts = Object.entries(j.taskStates)
        .map(([k, v]) => `${v} ${k}`)
        .join(', ');
      t.push([j.id, j.name, j.state, counts || String(j.tasks), j.profile, new Date(j.submittedAtMs).toISOString().slice(11, 19)]);
    }
    out(res.jobs.length === 0 ? 'no jobs' : t.toString());
    if (res.retainMs > 0) out(`(finished jobs are deleted ${fmtRetain(res.retainMs)} after they end)`);
  } finally {
    c.close();
  }
}

export async function clusterCommand(o: ClientFlags & { json: boolean }, out: (s: string) => void): Promise<void> {
  const c = client(o);
  try {
    const cl = await unary<Cluster__Output>(o, (opts, cb) => c.GetCluster({}, opts, cb));
    if (o.json) {
      out(JSON.stringify(cl, null, 2));
      return;
    }
    const t = new Table({ style: TABLE_STYLE, head: ['server', 'platform', 'rack', 'state', 'free', 'busy', 'RUs (. free, # busy, r reserved, x down)'] });
    for (const s of cl.servers) {
      const map = s.rus.map((r) => (r.state === 'free' ? '.' : r.state === 'busy' ? '#' : r.state === 'reserved' ? 'r' : 'x')).join('');
      t.push([s.id, s.platform, s.rack, s.state, s.free, s.busy, map]);
    }
    out(t.toString());
    out(`${cl.servers.length} servers, ${cl.rus} RUs: ${cl.free} free, ${cl.busy} busy, ${cl.down} down; ${cl.activeJobs} active jobs, ${cl.queuedJobs} waiting`);
    for (const l of nodeNotes(cl.servers)) out(l);
    const b = cl.buckets.filter((x) => x.rus > 0);
    if (b.length > 0) out(`admission buckets (free/RUs): ${b.map((x) => `#${x.id} ${x.free}/${x.rus}`).join('  ')}`);
  } finally {
    c.close();
  }
}

export async function explainCommand(id: string, o: ClientFlags & { json: boolean }, out: (s: string) => void): Promise<void> {
  const c = client(o);
  try {
    const e = await unary<Explanation__Output>(o, (opts, cb) => c.ExplainJob({ jobId: id }, opts, cb));
    out(o.json ? JSON.stringify(e, null, 2) : e.text);
  } finally {
    c.close();
  }
}

export async function cancelCommand(id: string, o: ClientFlags, out: (s: string) => void): Promise<void> {
  const c = client(o);
  try {
    const j = await unary<Job__Output>(o, (opts, cb) => c.CancelJob({ jobId: id }, opts, cb));
    out(FINAL.has(j.state) ? `${j.id} is already ${j.state}` : `cancelling ${j.id} (${j.state}); \`tarcil status ${j.id}\` shows when it has stopped`);
  } finally {
    c.close();
  }
}


/** `tarcil profile <name> --learned`: a class's declared and learned vectors, from a front-end. */
export async function learnedProfileCommand(name: string, o: ClientFlags & { json: boolean }, out: (s: string) => void): Promise<void> {
  const c = client(o);
  try {
    const p = await unary<ProfileEstimate__Output>(o, (opts, cb) => c.GetProfile({ name }, opts, cb));
    if (o.json) return out(JSON.stringify(p, null, 2));
    const names = (await import('../model/catalog.ts')).loadCatalog().resources;
    const lines = [`profile ${p.name}: ${p.observations} observation(s)${p.observations > 0 ? `, gain ${p.gain.toFixed(2)}, rmse ${p.rmse.toFixed(3)}, updated ${new Date(p.updatedAtMs).toISOString()}` : ''}`];
    lines.push(
      p.used
        ? `new jobs of this class are scheduled with the learned vector (it rests on at least ${p.minObservations} observations)`
        : `new jobs of this class are scheduled with the declared vector (${p.observations < p.minObservations ? `the learned one is used from ${p.minObservations} observations on` : 'this front-end does not use learned profiles'})`,
    );
    const t = new Table({ style: TABLE_STYLE, head: ['resource', 'declared', 'learned', 'change'] });
    p.declared.forEach((d, i) => {
      const l = p.learned[i];
      t.push([names[i]?.id ?? String(i), d.toFixed(0), l === undefined ? '-' : l.toFixed(1), l === undefined ? '' : `${l - d >= 0 ? '+' : ''}${(l - d).toFixed(1)}`]);
    });
    lines.push(t.toString());
    out(lines.join('\n'));
  } finally {
    c.close();
  }
}
