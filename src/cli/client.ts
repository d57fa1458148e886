/**
 * The client commands (submit, status, jobs, cluster, explain, cancel): calls to a front-end's
 * Scheduler service and their output: a table, `-o wide`, or the message as JSON or YAML
 * (output.ts), once or under `--watch` (watch.ts). They load the gRPC client and nothing of the daemons.
 */
import type * as grpc from '@grpc/grpc-js';
import Table from 'cli-table3';
import { attemptLines } from '../frontend/convert.ts';
import { bearer, schedulerClient } from './grpc-clients.ts';
import { clientCredentials } from '../rpc/grpc.ts';
import { clientConstructor } from '../rpc/proto-root.ts';
import { CLIENT_DEFAULTS } from '../frontend/options.ts';
import type { Cluster__Output } from '../rpc/gen/tarcil/v1/Cluster.ts';
import type { Explanation__Output } from '../rpc/gen/tarcil/v1/Explanation.ts';
import type { Job__Output } from '../rpc/gen/tarcil/v1/Job.ts';
import type { JobEvent__Output } from '../rpc/gen/tarcil/v1/JobEvent.ts';
import type { ListJobsResponse__Output } from '../rpc/gen/tarcil/v1/ListJobsResponse.ts';
import type { SubmitJobResponse__Output } from '../rpc/gen/tarcil/v1/SubmitJobResponse.ts';
import type { SchedulerClient } from '../rpc/gen/tarcil/v1/Scheduler.ts';
import { fmtRetain } from '../state/retention.ts';
import { TarcilError } from '../util/errors.ts';
import { clientTls } from './client-tls.ts';
import { readSpec } from './spec-file.ts';
import { fmtMs, SUBMIT_DEADLINE_MS } from './flags.ts';
import { EXIT, type ExitCode } from './exit-codes.ts';
import { tableStyle } from './color.ts';
import { clusterSummary, filterServers, serverList, type ServerFilter } from './cluster-view.ts';
import { formatOf, isDocument, renderMessage, type MessageName, type OutputFormat } from './output.ts';
import { interrupted, poll } from './watch.ts';
import { explainWideLines } from './explain-view.ts';
import type { ProfileEstimate__Output } from '../rpc/gen/tarcil/v1/ProfileEstimate.ts';

export interface ClientFlags {
  server: string;
  tlsCa?: string;
  /** A client certificate and its key (mutual TLS; a token may name the certificate). */
  tlsCert?: string;
  tlsKey?: string;
  /** The access token (`--token`, $TARCIL_TOKEN): sent with every call. */
  token?: string;
  timeout: number;
  /** `-n/--namespace` ($TARCIL_NAMESPACE): the namespace of the jobs named; default when absent. */
  namespace?: string;
}

/** The namespace field of a request: '' (the server reads it as default) unless -n gave one. */
function ns(o: ClientFlags): string {
  return o.namespace ?? '';
}

export function client(o: Pick<ClientFlags, 'server' | 'tlsCa' | 'tlsCert' | 'tlsKey' | 'token'>): SchedulerClient {
  return schedulerClient(o.server, clientTls(o), o.token || undefined);
}

export function unary<Res>(o: ClientFlags, invoke: (opts: grpc.CallOptions, cb: grpc.requestCallback<Res>) => unknown): Promise<Res> {
  return new Promise((resolve, reject) => {
    invoke({ deadline: new Date(Date.now() + o.timeout) }, (err, res) => {
      if (err) reject(fromGrpc(err, o.server));
      else if (!res) reject(new TarcilError('INTERNAL', 'empty response'));
      else resolve(res);
    });
  });
}

/** A gRPC status as the project's error; one that says the front-end was not reached names the address dialled. */
export function fromGrpc(err: grpc.ServiceError, server?: string): TarcilError {
  const names: Record<number, TarcilError['code']> = {
    3: 'INVALID_ARGUMENT',
    5: 'NOT_FOUND',
    6: 'ALREADY_EXISTS',
    8: 'RESOURCE_EXHAUSTED',
    9: 'FAILED_PRECONDITION',
    16: 'UNAUTHENTICATED',
    7: 'PERMISSION_DENIED',
    14: 'UNAVAILABLE',
    4: 'DEADLINE_EXCEEDED',
    1: 'CANCELLED',
  };
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

const FINAL = new Set(['succeeded', 'failed', 'cancelled']);

export interface SubmitFlags extends ClientFlags {
  wait: boolean;
  /** The idempotency key (default: a new UUID). */
  requestId?: string;
  /** `--deadline`: how long the submission is tried, ms (submitWithRetry). */
  deadline?: number;
  /** `--retries`: at most this many retries within the deadline (default: no limit). */
  retries?: number;
}

/**
 * `tarcil submit`: the exit code is EXIT.OK once the job is accepted; with --wait, EXIT.OK if it
 * succeeded and EXIT.JOB_FAILED if it failed or was cancelled.
 */
export async function submitCommand(file: string, o: SubmitFlags, out: (s: string) => void): Promise<ExitCode> {
  const text = readSpec(file);
  // node:crypto only here: the other commands do not load it.
  const requestId = o.requestId ?? (await import('node:crypto')).randomUUID();
  const c = retryingClient(o);
  try {
    const res = await submitWithRetry(
      c,
      { specJson: text, requestId, namespace: ns(o) },
      { ...o, ...(o.deadline !== undefined ? { deadlineMs: o.deadline } : {}) },
    );
    out(`submitted ${res.jobId}`);
    // What the cell will do with the job that its spec may not expect (a command not run, …).
    for (const w of res.warnings ?? []) process.stderr.write(`warning: ${w}\n`);
    if (!o.wait) return EXIT.OK;
    return await new Promise<ExitCode>((resolve, reject) => {
      const stream = c.WatchJob({ jobId: res.jobId });
      const tty = process.stdout.isTTY;
      let last: Job__Output | undefined;
      // An event may change only what the line does not show (a task's progress, a revision):
      // a line the same as the one before is not printed again.
      let shown = '';
      stream.on('data', (ev: { job: Job__Output | null }) => {
        if (!ev.job) return;
        last = ev.job;
        const l = line(ev.job);
        if (l === shown) return;
        shown = l;
        if (tty) process.stdout.write(`\r\x1b[K${l}`);
        else out(l);
      });
      stream.on('error', (err: grpc.ServiceError) => reject(fromGrpc(err, o.server)));
      stream.on('end', () => {
        if (tty) process.stdout.write('\n');
        if (last?.state === 'succeeded') resolve(EXIT.OK);
        else if (last && FINAL.has(last.state)) resolve(EXIT.JOB_FAILED);
        else
          reject(
            new TarcilError(
              'UNAVAILABLE',
              `the front-end at ${o.server} ended the watch of ${res.jobId} before the job ended (last seen ${last?.state ?? 'nothing'}); \`tarcil status ${res.jobId}\` shows it`,
            ),
          );
      });
    });
  } finally {
    c.close();
  }
}

/**
 * The reconnect back-off of a client that tries a call again: a channel whose connection failed
 * does not dial again before its back-off ends, and a call made meanwhile fails at once with the
 * last connection error (ECONNREFUSED). grpc-js's back-off starts at 1 s and grows 1.6 times per
 * failed connection (±20%) up to 120 s: after half a minute of a front-end down its dials are
 * some 17 s apart, and a front-end that is back waits for the next one. Capped at 1 s, a
 * front-end that is back is dialled within about a second (1.2 s with the jitter).
 */
export const RETRY_CHANNEL_OPTIONS = {
  'grpc.initial_reconnect_backoff_ms': 250,
  'grpc.max_reconnect_backoff_ms': 1000,
} as const;

/** The longest pause between two tries when the front-end was not reached (UNAVAILABLE). */
const UNREACHED_PAUSE_MAX_MS = 1000;

/** A Scheduler client for calls tried again (submitWithRetry): client()'s, with RETRY_CHANNEL_OPTIONS. */
export function retryingClient(o: Pick<ClientFlags, 'server' | 'tlsCa' | 'tlsCert' | 'tlsKey' | 'token'>): SchedulerClient {
  const opts: grpc.ClientOptions = {
    'grpc.max_receive_message_length': CLIENT_DEFAULTS.maxResponseBytes,
    ...RETRY_CHANNEL_OPTIONS,
    ...(o.token ? { interceptors: [bearer(o.token)] } : {}),
  };
  return new (clientConstructor('tarcil.v1.Scheduler'))(o.server, clientCredentials(clientTls(o)), opts) as unknown as SchedulerClient;
}

/**
 * SubmitJob, tried again with the same request id on UNAVAILABLE (the front-end not reached, or
 * its store unavailable), DEADLINE_EXCEEDED (the first attempt may have been persisted with only
 * its answer lost: the id makes the retry return that job instead of creating another) and
 * RESOURCE_EXHAUSTED (a front-end's back-pressure), until `deadlineMs` after the first try
 * (default SUBMIT_DEADLINE_MS; 0: one try). Each try has `timeout`, cut to the time left. The
 * pause between tries grows from `retryBaseMs`, jittered, up to 1 s after UNAVAILABLE and up to
 * CLIENT_DEFAULTS.retryMaxMs otherwise. `retries`, if given, also stops it after that many retries.
 *
 * A front-end that is back within the deadline is reached only if the channel dials it again in
 * time: give a client made by retryingClient (a reconnect back-off of at most about 1 s).
 */
export async function submitWithRetry(
  c: SchedulerClient,
  req: { specJson: string; requestId: string; namespace?: string },
  o: { timeout: number; deadlineMs?: number; retries?: number; retryBaseMs?: number; server?: string },
): Promise<SubmitJobResponse__Output> {
  const deadlineMs = o.deadlineMs ?? SUBMIT_DEADLINE_MS;
  const end = Date.now() + deadlineMs;
  let delay = o.retryBaseMs ?? CLIENT_DEFAULTS.retryBaseMs;
  for (let tries = 1; ; tries++) {
    const callEnd = deadlineMs === 0 ? Date.now() + o.timeout : Math.min(Date.now() + o.timeout, end);
    try {
      return await new Promise<SubmitJobResponse__Output>((resolve, reject) => {
        c.SubmitJob(req, { deadline: new Date(callEnd) }, (err, res) => {
          if (err) reject(err);
          else if (!res) reject(new TarcilError('INTERNAL', 'empty response'));
          else resolve(res);
        });
      });
    } catch (err) {
      if (!isServiceError(err)) throw err;
      const code = Number(err.code);
      if (code !== GRPC_UNAVAILABLE && code !== GRPC_DEADLINE_EXCEEDED && code !== GRPC_RESOURCE_EXHAUSTED) throw fromGrpc(err, o.server);
      const gaveUp = (why: string): TarcilError => {
        const e = fromGrpc(err, o.server);
        return new TarcilError(e.code, `the submission (request id ${req.requestId}) gave up after ${why}: ${e.message}`);
      };
      const tried = `${tries} ${tries === 1 ? 'try' : 'tries'}`;
      if (o.retries !== undefined && tries > o.retries) throw gaveUp(`${tried} (--retries ${o.retries})`);
      const pause = Math.min(delay, code === GRPC_UNAVAILABLE ? UNREACHED_PAUSE_MAX_MS : CLIENT_DEFAULTS.retryMaxMs);
      const pastDeadline = (): TarcilError => gaveUp(deadlineMs === 0 ? `${tried} (--deadline 0)` : `${fmtMs(deadlineMs)} (--deadline) and ${tried}`);
      const left = end - Date.now();
      if (left <= 0) throw pastDeadline();
      await new Promise((r) => setTimeout(r, Math.min(left, pause / 2 + Math.random() * (pause / 2))));
      if (Date.now() >= end) throw pastDeadline();
      delay = Math.min(delay * 2, CLIENT_DEFAULTS.retryMaxMs);
    }
  }
}

const GRPC_CANCELLED = 1;
const GRPC_DEADLINE_EXCEEDED = 4;
const GRPC_RESOURCE_EXHAUSTED = 8;
const GRPC_UNAVAILABLE = 14;

function isServiceError(e: unknown): e is grpc.ServiceError {
  return e instanceof Error && typeof (e as Partial<grpc.ServiceError>).code === 'number';
}

/** The output flags of status, jobs, cluster and explain. */
export interface OutputFlags {
  /** `-o`: json, yaml or wide (the table when unset). */
  output?: OutputFormat;
  /** The older spelling of `-o json`. */
  json?: boolean;
  /** `-w`: the answer, then its changes until Ctrl-C. */
  watch?: boolean;
  /** With --watch where the API has no stream: how often to ask, ms. */
  interval?: number;
}

const DEFAULT_INTERVAL_MS = 1000;

/** A document for -o json|yaml; under --watch JSON on one line and YAML after a `---`. */
export async function doc(fmt: 'json' | 'yaml', name: MessageName, m: object, watching: boolean): Promise<string> {
  const text = await renderMessage(fmt, name, m, { line: watching });
  return watching && fmt === 'yaml' ? `---\n${text}` : text;
}

const hms = (ms: number): string => (ms > 0 ? new Date(ms).toISOString().slice(11, 19) : '');

function statusLines(id: string, j: Job__Output, wide: boolean): string[] {
  const lines = [
    ...(j.reason?.text ? [`now: ${j.reason.text}`] : []),
    line(j),
    `  profile ${j.profile}, ${j.tasks} tasks, priority ${j.priority}, ${j.mode}, owner ${j.owner || '-'}`,
  ];
  // No task has a record yet (a queued job): what it waits to place instead of an empty table.
  if (j.taskList.length === 0 && j.tasksOmitted === 0) {
    lines.push(
      FINAL.has(j.state)
        ? `  ${j.tasks} task(s): none has a record`
        : `  ${j.mode === 'gang' ? `a gang of ${j.tasks} tasks, placed all at once` : `${j.tasks} task(s)`}: none placed yet`,
    );
    return lines;
  }
  const t = new Table({
    style: tableStyle(),
    head: ['task', 'state', 'RU', 'attempt', 'ran ms', 'exit', 'message', ...(wide ? ['placed', 'started', 'ended', 'log'] : [])],
  });
  for (const x of j.taskList) {
    const ran = x.startedAtMs && x.endedAtMs ? String(Math.round(x.endedAtMs - x.startedAtMs)) : '';
    const msg = wide ? x.message : (x.message || x.logPath).slice(0, 60);
    t.push([
      x.index,
      x.state,
      x.ru ? `${x.ru.server}/${x.ru.index}` : '',
      x.attempt,
      ran,
      x.exitCode ?? '',
      msg,
      ...(wide ? [hms(x.placedAtMs), hms(x.startedAtMs), hms(x.endedAtMs), x.logPath] : []),
    ]);
  }
  lines.push(t.toString());
  // tasks_omitted counts every record not on this page, below it (--tasks-from) and after it.
  if (j.nextTaskFrom > 0)
    lines.push(`  ${j.tasksOmitted} task(s) with a record not on this page; the next page: tarcil status ${id} --tasks-from ${j.nextTaskFrom}`);
  else if (j.tasksOmitted > 0) lines.push(`  ${j.tasksOmitted} task(s) with a record before this page not listed`);
  const again = j.taskList.filter((x) => x.previous.length > 0);
  if (again.length > 0) {
    lines.push(`  placed more than once: ${again.length} task(s)`);
    for (const x of again) for (const l of attemptLines(x)) lines.push(`  ${l}`);
  }
  for (const r of j.loadReports) lines.push(`  load report: task ${r.task} on ${r.server} runs at ${(r.rate * 100).toFixed(0)}% of its expected rate`);
  return lines;
}

export async function statusCommand(id: string, o: ClientFlags & OutputFlags & { tasksFrom?: number }, out: (s: string) => void): Promise<void> {
  const fmt = formatOf(o);
  const c = client(o);
  try {
    if (o.watch) return await watchJob(c, id, o, fmt, out);
    const j = await unary<Job__Output>(o, (opts, cb) => c.GetJob({ jobId: id, namespace: ns(o), taskFrom: o.tasksFrom ?? 0 }, opts, cb));
    if (isDocument(fmt)) return out(await doc(fmt, 'Job', j, false));
    for (const l of statusLines(id, j, fmt === 'wide')) out(l);
  } finally {
    c.close();
  }
}

/**
 * `status --watch`: the job's WatchJob stream. A table prints the job's line and each task that
 * changed; -o json|yaml prints each JobEvent (the job's summary, the tasks that changed, the
 * store revision). Ends when the job ends (the stream's end), or on Ctrl-C.
 */
function watchJob(c: SchedulerClient, id: string, o: ClientFlags, fmt: OutputFormat, out: (s: string) => void): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    const stream = c.WatchJob({ jobId: id, namespace: ns(o) });
    const stop = interrupted();
    void stop.promise.then(() => {
      stream.cancel();
      resolve();
    });
    let chain = Promise.resolve();
    let lastLine = '';
    stream.on('data', (ev: JobEvent__Output) => {
      chain = chain.then(async () => {
        if (isDocument(fmt)) return out(await doc(fmt, 'JobEvent', ev, true));
        const l = ev.job ? line(ev.job) : '';
        if (l && l !== lastLine) out(`${hms(Date.now())}  ${(lastLine = l)}`);
        for (const x of ev.tasks)
          out(
            `${hms(Date.now())}    task ${x.index} ${x.state}${x.ru ? ` on ${x.ru.server}/${x.ru.index}` : ''}${x.attempt > 1 ? ` (attempt ${x.attempt})` : ''}${x.message ? `  — ${x.message}` : ''}`,
          );
      });
    });
    stream.on('error', (err: grpc.ServiceError) => {
      stop.stop();
      if (Number(err.code) === GRPC_CANCELLED)
        resolve(); // cancelled by Ctrl-C
      else reject(fromGrpc(err, o.server));
    });
    stream.on('end', () => {
      stop.stop();
      void chain.then(() => resolve(), reject);
    });
  });
}

function jobRow(j: Job__Output, wide: boolean): (string | number)[] {
  const counts = Object.entries(j.taskStates)
    .map(([k, v]) => `${v} ${k}`)
    .join(', ');
  const row: (string | number)[] = [j.id, j.name, j.state, counts || String(j.tasks), j.profile, hms(j.submittedAtMs)];
  return wide ? [...row, j.priority, j.mode, j.owner, hms(j.finishedAtMs), j.rescheduled, j.message.slice(0, 80)] : row;
}

const JOB_HEAD = ['id', 'name', 'state', 'tasks', 'profile', 'submitted'];
const JOB_WIDE_HEAD = ['priority', 'mode', 'owner', 'finished', 'rescheduled', 'message'];

/** What tells one state of a listed job from another (under --watch). */
const jobKey = (j: Job__Output): string => JSON.stringify([j.state, j.taskStates, j.message, j.rescheduled, j.owner, j.finishedAtMs]);

export async function jobsCommand(
  o: ClientFlags & OutputFlags & { state?: string[]; limit: number; all?: boolean; allNamespaces?: boolean },
  out: (s: string) => void,
): Promise<void> {
  const fmt = formatOf(o);
  const wide = fmt === 'wide';
  const c = client(o);
  const list = (): Promise<ListJobsResponse__Output> =>
    unary<ListJobsResponse__Output>(o, (opts, cb) =>
      c.ListJobs({ states: o.state ?? [], limit: o.all === true ? 0 : o.limit, namespace: ns(o), allNamespaces: o.allNamespaces === true }, opts, cb),
    );
  try {
    if (!o.watch) {
      const res = await list();
      if (isDocument(fmt)) return out(await doc(fmt, 'ListJobsResponse', res, false));
      const t = new Table({ style: tableStyle(), head: [...JOB_HEAD, ...(wide ? JOB_WIDE_HEAD : [])] });
      for (const j of res.jobs) t.push(jobRow(j, wide));
      out(res.jobs.length === 0 ? 'no jobs' : t.toString());
      const left = listedOf(res.jobs.length, res.total, 'jobs', '--limit N or --all to see more');
      if (left) out(left);
      if (res.retainMs > 0) out(`(finished jobs are deleted ${fmtRetain(res.retainMs)} after they end)`);
      return;
    }
    // --watch: the list, then a row (a Job document) for each job that appears or changes.
    const seen = new Map<string, string>();
    await poll(
      list,
      async (res, first) => {
        const changed = [...res.jobs].reverse().filter((j) => seen.get(j.id) !== jobKey(j));
        for (const j of changed) seen.set(j.id, jobKey(j));
        if (isDocument(fmt)) {
          for (const j of changed) out(await doc(fmt, 'Job', j, true));
          return;
        }
        const t = new Table({
          style: first ? tableStyle() : { head: [], border: [] },
          ...(first ? { head: [...JOB_HEAD, ...(wide ? JOB_WIDE_HEAD : [])] } : { chars: NO_BORDER }),
        });
        for (const j of first ? res.jobs : changed) t.push(jobRow(j, wide));
        if (first && res.jobs.length === 0) out('no jobs (watching)');
        else if (t.length > 0) out(t.toString());
        const left = first ? listedOf(res.jobs.length, res.total, 'jobs', '--limit N or --all to see more') : '';
        if (left) out(left);
      },
      { intervalMs: o.interval ?? DEFAULT_INTERVAL_MS, key: (res) => JSON.stringify(res.jobs.map((j) => [j.id, jobKey(j)])) },
    );
  } finally {
    c.close();
  }
}

/** "50 of 159 jobs; --limit N or --all to see more" when a list left some out ('' otherwise). */
export function listedOf(listed: number, total: number, what: string, how: string): string {
  return total > listed ? `${listed} of ${total} ${what}; ${how}` : '';
}

/** cli-table3 without borders: the rows printed under a table already shown (jobs --watch). */
const NO_BORDER = {
  top: '',
  'top-mid': '',
  'top-left': '',
  'top-right': '',
  bottom: '',
  'bottom-mid': '',
  'bottom-left': '',
  'bottom-right': '',
  left: ' ',
  'left-mid': '',
  mid: '',
  'mid-mid': '',
  right: '',
  'right-mid': '',
  middle: '  ',
};

export interface ClusterFlags extends ClientFlags, OutputFlags, ServerFilter {
  /** List the servers (filtered, limited) instead of the summary. */
  servers?: boolean;
}

export async function clusterCommand(o: ClusterFlags, out: (s: string) => void): Promise<void> {
  const fmt = formatOf(o);
  const c = client(o);
  const get = (): Promise<Cluster__Output> => unary<Cluster__Output>(o, (opts, cb) => c.GetCluster({}, opts, cb));
  // Documents carry the servers the filter passes (all of them without a filter or a limit).
  const view = (cl: Cluster__Output): Cluster__Output => ({ ...cl, servers: filterServers(cl.servers, o).servers });
  const text = (cl: Cluster__Output): string[] => (o.servers ? serverList(cl, o, fmt === 'wide') : clusterSummary(cl, fmt === 'wide'));
  try {
    if (!o.watch) {
      const cl = await get();
      if (isDocument(fmt)) return out(await doc(fmt, 'Cluster', view(cl), false));
      for (const l of text(cl)) out(l);
      return;
    }
    await poll(
      get,
      async (cl, first) => {
        if (isDocument(fmt)) return out(await doc(fmt, 'Cluster', view(cl), true));
        if (!first) out('');
        out(`— ${hms(Date.now())}`);
        for (const l of text(cl)) out(l);
      },
      { intervalMs: o.interval ?? DEFAULT_INTERVAL_MS, key: (cl) => (isDocument(fmt) ? JSON.stringify(view(cl)) : text(cl).join('\n')) },
    );
  } finally {
    c.close();
  }
}

export async function explainCommand(id: string, o: ClientFlags & OutputFlags, out: (s: string) => void): Promise<void> {
  const fmt = formatOf(o);
  const c = client(o);
  const get = (): Promise<Explanation__Output> => unary<Explanation__Output>(o, (opts, cb) => c.ExplainJob({ jobId: id, namespace: ns(o) }, opts, cb));
  // -o wide: the account, then the decision record in full (explain-view.ts).
  const text = (e: Explanation__Output): string => (fmt === 'wide' ? [e.text, ...explainWideLines(e)].join('\n') : e.text);
  try {
    if (!o.watch) {
      const e = await get();
      return out(isDocument(fmt) ? await doc(fmt, 'Explanation', e, false) : text(e));
    }
    // --watch: again whenever the account changes, until the job has ended and nothing is in progress.
    await poll(
      get,
      async (e, first) => {
        if (isDocument(fmt)) return out(await doc(fmt, 'Explanation', e, true));
        if (!first) out('');
        out(`— ${hms(Date.now())}`);
        out(text(e));
      },
      // The reason's time waited (and the text that says it) grows with every call: it alone is no change.
      {
        intervalMs: o.interval ?? DEFAULT_INTERVAL_MS,
        key: (e) =>
          JSON.stringify({ ...e, reason: e.reason ? { ...e.reason, waitedMs: 0, text: e.reason.text.replace(/; waited [^,]+, past/, '; past') } : null }),
        done: (e) => FINAL.has(e.state) && !e.inProgress,
      },
    );
  } finally {
    c.close();
  }
}

export async function cancelCommand(id: string, o: ClientFlags, out: (s: string) => void): Promise<void> {
  const c = client(o);
  try {
    const j = await unary<Job__Output>(o, (opts, cb) => c.CancelJob({ jobId: id, namespace: ns(o) }, opts, cb));
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
    const lines = [
      `profile ${p.name}: ${p.observations} observation(s)${p.observations > 0 ? `, gain ${p.gain.toFixed(2)}, rmse ${p.rmse.toFixed(3)}, updated ${new Date(p.updatedAtMs).toISOString()}` : ''}`,
    ];
    lines.push(
      p.used
        ? `new jobs of this class are scheduled with the learned vector (it rests on at least ${p.minObservations} observations)`
        : `new jobs of this class are scheduled with the declared vector (${p.observations < p.minObservations ? `the learned one is used from ${p.minObservations} observations on` : 'this front-end does not use learned profiles'})`,
    );
    const t = new Table({ style: tableStyle(), head: ['resource', 'declared', 'learned', 'change'] });
    p.declared.forEach((d, i) => {
      const l = p.learned[i];
      t.push([
        names[i]?.id ?? String(i),
        d.toFixed(0),
        l === undefined ? '-' : l.toFixed(1),
        l === undefined ? '' : `${l - d >= 0 ? '+' : ''}${(l - d).toFixed(1)}`,
      ]);
    });
    lines.push(t.toString());
    out(lines.join('\n'));
  } finally {
    c.close();
  }
}
