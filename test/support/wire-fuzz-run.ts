/**
 * The runner and oracle of the wire fuzzer (requests from wire-fuzz.ts): a front-end and the
 * monitors of the demo cell in this process, on the embedded MemoryStore, and every request sent
 * as the bytes the generator built, through a generic gRPC client that passes them as they are.
 *
 * Each answer is judged:
 * - its status is one the API documents for the RPC (proto/tarcil/v1/*.proto comments and the
 *   docs/operations.md, "Limits"); INTERNAL and UNKNOWN are always findings, and so is a call that gets no
 *   answer before its deadline;
 * - a refused call stored nothing: the store's changes between the revision before the call and
 *   the one after it, but for audit records (`audit/`), the housekeeper's election (`election/`,
 *   outside the cell's prefix) and the work of jobs the run had submitted and seen accepted
 *   (every key of such a job, and whatever a transaction writing one of them wrote with it);
 * - an answer decodes as the RPC's response type;
 * and every so often (and at the end) the server is healthy: grpc.health.v1 Check answers
 * SERVING and a valid GetCluster works.
 */
import * as grpc from '@grpc/grpc-js';
import { service as healthService } from 'grpc-health-check';
import { join } from 'node:path';
import { pino } from 'pino';
import protobuf from 'protobufjs';
import { schedulerClient } from '../../src/cli/grpc-clients.ts';
import type { SchedulerClient } from '../../src/rpc/gen/tarcil/v1/Scheduler.ts';
import { PROTO_DIR, PROTO_FILES, protoRoot } from '../../src/rpc/proto-root.ts';
import { startScheduler, type SchedulerProcess } from '../../src/frontend/runtime.ts';
import { startMonitor, type MonitorProcess } from '../../src/node/runtime.ts';
import { expandCluster, loadCatalog, resolveCluster } from '../../src/model/catalog.ts';
import { Keys } from '../../src/state/keys.ts';
import { MemoryStore } from '../../src/store/memory.ts';
import type { WatchHandle } from '../../src/store/types.ts';
import { SystemClock } from '../../src/util/clock.ts';
import { SeededRng } from '../../src/util/rng.ts';
import {
  buildCase,
  corrupts,
  exhaustiveCases,
  MAX_REQUEST_BYTES,
  plan,
  randomCase,
  type Bases,
  type FuzzCase,
  type Kind,
  type Msg,
  type Plan,
  type Site,
} from './wire-fuzz.ts';

/** Status codes as plain numbers (a call's code is a number). */
const S: Record<keyof typeof grpc.status, number> = grpc.status;
type Code = keyof typeof grpc.status;

/**
 * What each RPC may answer a request, valid or not, as documented: the proto's comments
 * (proto/tarcil/v1/scheduler.proto, monitor.proto) and the README (namespaces, access control,
 * `tarcil node`, TaskLogs, "Limits"). Any RPC may also answer RESOURCE_EXHAUSTED to a request
 * larger than 1 MiB (README "Limits").
 */
export const DOCUMENTED: Record<string, readonly Code[]> = {
  // "an invalid spec is answered with INVALID_ARGUMENT"; "can never run ... FAILED_PRECONDITION";
  // "Reusing a key for another spec is refused with ALREADY_EXISTS"; an unknown namespace:
  // NOT_FOUND (README "Namespaces"); a namespace at its max_waiting_jobs, or a front-end at its
  // --max-pending-tasks: RESOURCE_EXHAUSTED (README "Limits").
  'Scheduler/SubmitJob': ['OK', 'INVALID_ARGUMENT', 'FAILED_PRECONDITION', 'ALREADY_EXISTS', 'NOT_FOUND', 'RESOURCE_EXHAUSTED'],
  // A malformed id or namespace: INVALID_ARGUMENT (README "Namespaces"); unknown or aged out: NOT_FOUND.
  'Scheduler/GetJob': ['OK', 'INVALID_ARGUMENT', 'NOT_FOUND'],
  // "NOT_FOUND at once for an unknown job; a client that reads too slowly is dropped with RESOURCE_EXHAUSTED".
  'Scheduler/WatchJob': ['OK', 'INVALID_ARGUMENT', 'NOT_FOUND', 'RESOURCE_EXHAUSTED'],
  'Scheduler/CancelJob': ['OK', 'INVALID_ARGUMENT', 'NOT_FOUND'],
  // An unknown state filter or a malformed namespace: INVALID_ARGUMENT.
  'Scheduler/ListJobs': ['OK', 'INVALID_ARGUMENT'],
  'Scheduler/GetCluster': ['OK'],
  'Scheduler/ExplainJob': ['OK', 'INVALID_ARGUMENT', 'NOT_FOUND'],
  'Scheduler/GetProfile': ['OK', 'INVALID_ARGUMENT', 'NOT_FOUND'],
  // "NOT_FOUND for a server the cell does not know; INVALID_ARGUMENT naming the field for a bad request."
  'Scheduler/SetNodeScheduling': ['OK', 'INVALID_ARGUMENT', 'NOT_FOUND'],
  // README "tarcil logs": a simulated node FAILED_PRECONDITION, a node not registered UNAVAILABLE,
  // a task never placed FAILED_PRECONDITION, an unknown job or task NOT_FOUND or INVALID_ARGUMENT.
  'Scheduler/TaskLogs': ['OK', 'INVALID_ARGUMENT', 'NOT_FOUND', 'FAILED_PRECONDITION', 'UNAVAILABLE'],
  'Scheduler/ListNamespaces': ['OK'],
  // A bad name, weight or quota: INVALID_ARGUMENT naming the field (README "Namespaces").
  'Scheduler/PutNamespace': ['OK', 'INVALID_ARGUMENT'],
  // "Deletes a namespace that holds no job; FAILED_PRECONDITION otherwise"; unknown: NOT_FOUND.
  'Scheduler/DeleteNamespace': ['OK', 'INVALID_ARGUMENT', 'NOT_FOUND', 'FAILED_PRECONDITION'],
  // "Works once per cell ... the other FAILED_PRECONDITION"; a bad name INVALID_ARGUMENT.
  'Scheduler/AclBootstrap': ['OK', 'INVALID_ARGUMENT', 'FAILED_PRECONDITION'],
  'Scheduler/CreateToken': ['OK', 'INVALID_ARGUMENT'],
  'Scheduler/ListTokens': ['OK'],
  // A malformed accessor: INVALID_ARGUMENT; an unknown one NOT_FOUND.
  'Scheduler/RevokeToken': ['OK', 'INVALID_ARGUMENT', 'NOT_FOUND'],
  'Scheduler/ListAudit': ['OK', 'INVALID_ARGUMENT'],
  // "A single-node monitor refuses another server's request (FAILED_PRECONDITION)"; a bad RU index INVALID_ARGUMENT.
  'NodeMonitor/LaunchTask': ['OK', 'INVALID_ARGUMENT', 'FAILED_PRECONDITION'],
  'NodeMonitor/KillTask': ['OK', 'INVALID_ARGUMENT', 'FAILED_PRECONDITION'],
  'NodeMonitor/GetStats': ['OK', 'INVALID_ARGUMENT', 'FAILED_PRECONDITION'],
  // "FAILED_PRECONDITION on a node whose executor writes no logs (simulated); NOT_FOUND when no attempt of the task ran here."
  'NodeMonitor/ReadTaskLog': ['OK', 'INVALID_ARGUMENT', 'FAILED_PRECONDITION', 'NOT_FOUND'],
};

/**
 * Values the proto's comments list for a string field (`// cordon | drain | uncordon`), by the
 * field's full name: a request with another value (not empty: proto3's unset) must be refused.
 */
export function listedValues(): Map<string, string[]> {
  const r = new protobuf.Root();
  r.resolvePath = (_origin: string, target: string) => join(PROTO_DIR, target);
  r.loadSync(PROTO_FILES, { keepCase: false, alternateCommentMode: true });
  const out = new Map<string, string[]>();
  const walk = (ns: protobuf.NamespaceBase): void => {
    for (const n of ns.nestedArray) {
      if (n instanceof protobuf.Type) {
        for (const f of n.fieldsArray)
          if (f.type === 'string' && f.comment && /^[a-z-]+( \| [a-z-]+)+$/.test(f.comment.trim())) out.set(f.fullName, f.comment.trim().split(' | '));
      }
      if (n instanceof protobuf.Namespace || n instanceof protobuf.Type) walk(n);
    }
  };
  walk(r);
  return out;
}

/** String mutations whose value is not empty (empty, and a field skipped for its wrong wire type, read as unset). */
const NONEMPTY_STRING_KINDS: ReadonlySet<Kind> = new Set([
  'wrong-case',
  'padded',
  'nul',
  'control',
  'invalid-utf8',
  'unicode',
  'emoji-odd',
  'emoji-even',
  'huge',
  'key-proto',
  'key-constructor',
  'key-tostring',
  'unknown',
]);
/** Numbers the API refuses whatever the field (scheduler.proto: "a negative, fractional, NaN or huge value is reported"). */
const NON_FINITE_KINDS: ReadonlySet<Kind> = new Set(['nan', 'inf', 'neg-inf']);

/** The name of a gRPC status code. */
export const codeName = (code: number): string => Object.entries(S).find(([, c]) => c === code)?.[0] ?? `code ${code}`;

// ---------------------------------------------------------------------------------------------
// The cell.

/** Lines the cell's processes logged at warn and above (the guard's incidents among them). */
export class LogSink {
  readonly lines: string[] = [];
  write(line: string): void {
    this.lines.push(line);
    if (this.lines.length > 5000) this.lines.splice(0, 1000);
  }
  /** The logged line of an incident id (`internal error in ... (incident e-...`), as an object. */
  incident(details: string): { err?: string; stack?: string } | undefined {
    const id = /incident (e-[0-9a-f]+)/.exec(details)?.[1];
    if (!id) return undefined;
    const line = this.lines.find((l) => l.includes(`"incident":"${id}"`));
    return line ? (JSON.parse(line) as { err?: string; stack?: string }) : undefined;
  }
}

export interface Fixtures {
  /** A finished job of namespace default (2 tasks). */
  jobId: string;
  /** A namespace other than default, where the run's accepted jobs go. */
  namespace: string;
  /** A token's accessor. */
  accessor: string;
  /** The server whose monitor the NodeMonitor calls reach. */
  server: string;
}

export interface FuzzCell {
  store: MemoryStore;
  keys: Keys;
  sched: SchedulerProcess;
  monitors: MonitorProcess[];
  /** host:port of the front-end and of the monitor of `fixtures.server`. */
  schedulerAddr: string;
  monitorAddr: string;
  client: SchedulerClient;
  log: LogSink;
  fixtures: Fixtures;
  close(): Promise<void>;
}

const unary = <T>(fn: (cb: (err: grpc.ServiceError | null, res?: T) => void) => void): Promise<T> =>
  new Promise((resolve, reject) => fn((err, res) => (err || res === undefined ? reject(err ?? new Error('empty answer')) : resolve(res))));

/** The demo cell (10 servers, 24 RUs) on the embedded store, with a front-end of 2 agents and the run's fixtures. */
export async function startFuzzCell(o: { seed: number; prefix?: string }): Promise<FuzzCell> {
  const store = new MemoryStore();
  const keys = new Keys(o.prefix ?? '/fuzz/');
  const clock = new SystemClock();
  const sink = new LogSink();
  const log = pino({ name: 'fuzz', level: 'warn' }, sink);
  const catalog = loadCatalog();
  const servers = expandCluster(resolveCluster('demo', catalog), catalog.platforms);
  const monitors: MonitorProcess[] = [];
  const close = async (): Promise<void> => {
    await sched?.close();
    await Promise.all(monitors.map((m) => m.close()));
    await store.close();
  };
  let sched: SchedulerProcess | undefined;
  try {
    for (const server of servers)
      monitors.push(await startMonitor({ store, keys, clock, log, server, executor: 'simulated', host: '127.0.0.1', port: 0, leaseTtlSeconds: 10 }));
    sched = await startScheduler({
      name: 'fuzz',
      store,
      keys,
      catalog,
      clock,
      rng: new SeededRng(o.seed),
      log,
      agents: 2,
      host: '127.0.0.1',
      port: 0,
      leaseTtlSeconds: 10,
      // Learned profiles are written on a timer: not during a run, so that the store changes only
      // with the calls and the jobs they submitted.
      profiles: { flushMs: 3_600_000 },
    });
  } catch (e) {
    await close();
    throw e;
  }
  const schedulerAddr = `127.0.0.1:${sched.port}`;
  const client = schedulerClient(schedulerAddr);
  const server = servers[0]?.id ?? 's0000';
  const monitor = monitors[0] as MonitorProcess;
  const deadline = (): { deadline: Date } => ({ deadline: new Date(Date.now() + 15_000) });
  const { jobId } = await unary<{ jobId: string }>((cb) =>
    client.SubmitJob({ spec: { name: 'fuzz-fixture', profileName: 'spark-lr', tasks: 2, durationMs: 1 } }, deadline(), cb),
  );
  for (let t0 = Date.now(); ;) {
    const job = await unary<{ state: string }>((cb) => client.GetJob({ jobId }, deadline(), cb));
    if (job.state === 'succeeded') break;
    if (Date.now() - t0 > 15_000) throw new Error(`fixture job ${jobId} not final after 15 s (${job.state})`);
    await new Promise((r) => setTimeout(r, 20));
  }
  await unary((cb) => client.PutNamespace({ name: 'fuzz', weight: 1 }, deadline(), cb));
  const token = await unary<{ token: { accessor: string } | null }>((cb) =>
    client.CreateToken({ name: 'fuzz', policyJson: '{"namespaces":{"default":["read"]}}' }, deadline(), cb),
  );
  if (!token.token) throw new Error('CreateToken answered no token');
  return {
    store,
    keys,
    sched,
    monitors,
    schedulerAddr,
    monitorAddr: `127.0.0.1:${monitor.port}`,
    client,
    log: sink,
    fixtures: { jobId, namespace: 'fuzz', accessor: token.token.accessor, server },
    close: async () => {
      client.close();
      await close();
    },
  };
}

// ---------------------------------------------------------------------------------------------
// Valid requests.

const CAUSED = [10, 10, 10, 10, 10, 10, 10, 10, 10, 10];

/** A valid JobSpec (as a request tree) with every field set, in namespace `ns` when given. */
function jobSpec(ns?: string): Msg {
  return {
    name: 'fuzz',
    profileName: 'spark-lr',
    tasks: 1,
    priority: 10,
    mode: 'incremental',
    locality: { mode: 'any', scope: 'server' },
    constraints: { platforms: ['m3-large', 'c3-large', 'r3-xlarge'], attributes: [['ssd', 'true']], dataServers: [] },
    maxQueueMs: 60_000,
    durationMs: 1,
    migratable: false,
    ...(ns !== undefined ? { namespace: ns } : {}),
  };
}

/**
 * Valid requests to build cases on (see Bases). An RPC without an entry is fuzzed from its empty
 * request; a message type without a fill is entered empty.
 */
export function validBases(fx: Fixtures): Bases {
  const spec = jobSpec(fx.namespace);
  const specJson = JSON.stringify({ name: 'fuzz', profile: 'spark-lr', tasks: 1, durationMs: 1, namespace: fx.namespace });
  const requests: Record<string, (n: number) => Msg[]> = {
    'Scheduler/SubmitJob': (n) => [
      { spec, requestId: `fuzz-${n}` },
      { specJson, requestId: `fuzz-${n}` },
      { spec: jobSpec(), requestId: `fuzz-${n}`, namespace: fx.namespace },
    ],
    'Scheduler/GetJob': () => [{ jobId: fx.jobId, taskFrom: 0, taskLimit: 10, namespace: 'default' }],
    'Scheduler/WatchJob': () => [{ jobId: fx.jobId, namespace: 'default' }],
    'Scheduler/CancelJob': () => [{ jobId: fx.jobId, namespace: 'default' }],
    'Scheduler/ListJobs': () => [{ states: ['succeeded'], limit: 5, namespace: 'default', allNamespaces: false }],
    'Scheduler/ExplainJob': () => [{ jobId: fx.jobId, namespace: 'default' }],
    'Scheduler/GetProfile': () => [{ name: 'spark-lr' }],
    // The last server of the cell is drained (the fixtures run on the others).
    'Scheduler/SetNodeScheduling': () => [{ server: 's0009', action: 'drain', deadlineMs: 60_000, reason: 'fuzz' }],
    'Scheduler/TaskLogs': () => [{ jobId: fx.jobId, task: 0, follow: false, namespace: 'default' }],
    'Scheduler/PutNamespace': () => [{ name: fx.namespace, weight: 1, maxRus: 0, maxWaitingJobs: 0 }],
    'Scheduler/DeleteNamespace': () => [{ name: 'fuzz-gone' }],
    'Scheduler/AclBootstrap': () => [{ name: 'fuzz-boot' }],
    'Scheduler/CreateToken': () => [{ name: 'fuzz', policyJson: '{"namespaces":{"default":["read"]}}', ttlMs: 3_600_000, certCommonName: 'fuzz-client' }],
    'Scheduler/RevokeToken': () => [{ accessor: fx.accessor }],
    'Scheduler/ListAudit': () => [{ sinceMs: 1, namespace: 'default', limit: 10 }],
    'NodeMonitor/LaunchTask': () => [{ job: fx.jobId, task: 0, ruIndex: 0, revision: 1, server: fx.server }],
    'NodeMonitor/KillTask': () => [{ job: fx.jobId, task: 0, reason: 'cancelled', server: fx.server }],
    'NodeMonitor/GetStats': () => [{ server: fx.server }],
    'NodeMonitor/ReadTaskLog': () => [{ server: fx.server, job: fx.jobId, task: 0, follow: false }],
  };
  const fills: Record<string, Msg> = {
    'tarcil.v1.JobSpec': spec,
    'tarcil.v1.InlineProfile': {
      name: 'fuzz-inline',
      description: 'fuzz',
      family: 'fuzz',
      caused: CAUSED,
      platformPerf: [['m3-large', 1]],
      typicalDurationMs: 1000,
      latencyCritical: false,
    },
    'tarcil.v1.Locality': { mode: 'spread', scope: 'rack', required: false },
    'tarcil.v1.Constraints': { platforms: ['m3-large'], attributes: [['ssd', 'true']], dataServers: ['s0001'] },
    'tarcil.v1.Command': { argv: ['true'], env: [['LC_ALL', 'C']] },
    'tarcil.v1.ScaleOut': { maxTasks: 2 },
  };
  return {
    request: (rpc, n) => requests[rpc]?.(n) ?? [{}],
    fill: (type) => fills[type.fullName.replace(/^\./, '')],
  };
}

// ---------------------------------------------------------------------------------------------
// Calls.

export interface Answer {
  code: number;
  details: string;
  /** The messages received (one for a unary call). */
  messages: Buffer[];
  /** A stream still open when the client stopped reading (after `streamCapMs` or 50 messages). */
  open: boolean;
  ms: number;
}

const identity = (b: Buffer): Buffer => b;

/** A client of every method of `rpcs`, sending and receiving bytes as they are. */
function rawClient(addr: string, rpcs: Plan['rpcs'], service: string): Record<string, (...a: unknown[]) => unknown> & grpc.Client {
  const def: Record<string, grpc.MethodDefinition<Buffer, Buffer>> = {};
  for (const r of rpcs.filter((x) => x.service === service)) {
    def[r.method] = {
      path: r.path,
      requestStream: false,
      responseStream: r.responseStream,
      requestSerialize: identity,
      requestDeserialize: identity,
      responseSerialize: identity,
      responseDeserialize: identity,
    };
  }
  const Client = grpc.makeGenericClientConstructor(def, service);
  return new Client(addr, grpc.credentials.createInsecure(), {
    'grpc.max_send_message_length': 4 * MAX_REQUEST_BYTES,
    'grpc.max_receive_message_length': 64 << 20,
  }) as never;
}

/**
 * One call with the request's bytes as they are. `abandon` is set to a function that gives up
 * waiting (the call is cancelled and answered `abandoned`): the server failed in a way this
 * process saw, and will not answer.
 */
function callRaw(
  client: Record<string, (...a: unknown[]) => unknown>,
  method: string,
  stream: boolean,
  bytes: Buffer,
  deadlineMs: number,
  streamCapMs: number,
  abandon: { now?: () => void } = {},
): Promise<Answer & { abandoned: boolean }> {
  const t0 = performance.now();
  const deadline = new Date(Date.now() + deadlineMs);
  return new Promise((resolve) => {
    let settled = false;
    let call: { cancel(): void } | undefined;
    const messages: Buffer[] = [];
    const timer: { cap?: NodeJS.Timeout } = {};
    const done = (code: number, details: string, open = false, abandoned = false): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer.cap);
      abandon.now = undefined;
      resolve({ code, details, messages, open, ms: performance.now() - t0, abandoned });
    };
    abandon.now = () => {
      done(S.CANCELLED, 'abandoned: the server will not answer', false, true);
      call?.cancel();
    };
    const fn = client[method];
    if (!fn) {
      done(S.UNIMPLEMENTED, `no client method ${method}`);
      return;
    }
    if (!stream) {
      call = fn.call(client, bytes, { deadline }, (err: grpc.ServiceError | null, res?: Buffer) => {
        if (res) messages.push(res);
        done(err ? err.code : S.OK, err ? err.details : '');
      }) as grpc.ClientUnaryCall;
      return;
    }
    const s = fn.call(client, bytes, { deadline }) as grpc.ClientReadableStream<Buffer>;
    call = s;
    const stop = (): void => {
      done(S.OK, '', true);
      s.cancel();
    };
    timer.cap = setTimeout(stop, streamCapMs);
    s.on('data', (b: Buffer) => {
      messages.push(b);
      if (messages.length >= 50) stop();
    });
    s.on('status', (st: grpc.StatusObject) => done(st.code, st.details));
    s.on('error', (e: grpc.ServiceError) => done(e.code, e.details));
  });
}

// ---------------------------------------------------------------------------------------------
// The store's changes.

interface Change {
  revision: number;
  key: string;
}

/**
 * Every change of the store, from a watch of all its keys: what changed between two revisions
 * (the key set before a call and after it differ by exactly these).
 */
class Journal {
  private changes: Change[] = [];
  private handle: WatchHandle | undefined;
  seen = 0;
  failed: string | undefined;

  async start(store: MemoryStore): Promise<void> {
    const from = (await store.revision()) + 1;
    this.seen = from - 1;
    this.handle = await store.watch({
      prefix: '',
      fromRevision: from,
      onEvents: (b) => {
        for (const e of b.events) this.changes.push({ revision: b.revision, key: e.kv.key });
        this.seen = b.revision;
      },
      onError: (e) => {
        this.failed = e.message;
      },
    });
  }

  /** Waits until the watch has delivered revision `rev`. */
  async upTo(rev: number): Promise<void> {
    for (let i = 0; this.seen < rev && this.failed === undefined; i++) {
      if (i > 2000) throw new Error(`the store's watch did not deliver revision ${rev} (at ${this.seen})`);
      await new Promise((r) => setImmediate(r));
    }
    if (this.failed !== undefined) throw new Error(`the store's watch ended: ${this.failed}`);
  }

  /** The changes of revisions in (from, to], and the ones before `to` let go. */
  take(from: number, to: number): Change[] {
    const out = this.changes.filter((c) => c.revision > from && c.revision <= to);
    this.changes = this.changes.filter((c) => c.revision > to);
    return out;
  }

  async close(): Promise<void> {
    await this.handle?.close();
  }
}

// ---------------------------------------------------------------------------------------------
// The run.

export interface Outcome {
  c: FuzzCase;
  bytes: number;
  status: string;
  details: string;
  ms: number;
  /** Keys a refused call changed (none when nothing was stored). */
  stored: string[];
  /** How many keys the call changed (audit records and the election aside), whatever its answer. */
  changes: number;
  /** The stack of an unhandled rejection during the call. */
  serverLog?: string;
  findings: string[];
}

export interface Finding {
  seed: number;
  o: Outcome;
  what: string;
  /** The server's log line for an INTERNAL answer: its error and stack. */
  serverLog?: string;
}

export interface RunOptions {
  seed: number;
  /** Random cases after the exhaustive phase (or all of them without it). */
  random: number;
  /** Every (RPC, path, kind) once first (default true). */
  exhaustive?: boolean;
  /** Only these case numbers (a replay). */
  only?: readonly number[];
  /** Health is checked after every `healthEvery` requests (default 100) and at the end. */
  healthEvery?: number;
  /** A call not answered within this (plus 1 ms per 100 request bytes) is a finding (default 15 s). */
  deadlineMs?: number;
  streamCapMs?: number;
  /** Told of each outcome as it comes (progress, findings as they happen). */
  onOutcome?: (o: Outcome) => void;
}

export interface RunResult {
  seed: number;
  outcomes: Outcome[];
  findings: Finding[];
  /** Health problems seen (empty: every check answered SERVING and GetCluster worked). */
  health: string[];
  /** `<rpc> <path>` of every request sent, and `<rpc> <path> <kind>`. */
  covered: Set<string>;
  coveredKinds: Set<string>;
  ms: number;
}

/** The case of one outcome, as a line that says how to build it again. */
export function describeCase(seed: number, c: FuzzCase): string {
  return `seed ${seed} case ${c.n}: ${c.rpc} ${c.mutations.map((m) => `${m.path} ← ${m.kind}`).join(', ')}`;
}

export function describeFinding(f: Finding): string {
  const o = f.o;
  return [
    `${describeCase(f.seed, o.c)}`,
    `  status ${o.status}${o.details ? `: ${o.details.slice(0, 300)}` : ''} (${o.bytes} request bytes, ${o.ms.toFixed(0)} ms)`,
    `  finding: ${f.what}`,
    ...(f.serverLog ? [`  server log: ${f.serverLog}`] : []),
  ].join('\n');
}

/** The cases of a run: every (RPC, path, kind) once, then `random` random ones. */
export function casesOf(p: Plan, o: Pick<RunOptions, 'seed' | 'random' | 'exhaustive'>): FuzzCase[] {
  const first = o.exhaustive === false ? [] : exhaustiveCases(p);
  const more = Array.from({ length: o.random }, (_, i) => randomCase(p, o.seed, first.length + i));
  return [...first, ...more];
}

export class WireFuzzer {
  readonly plan: Plan;
  private readonly bases: Bases;
  private readonly clients: Map<string, Record<string, (...a: unknown[]) => unknown> & grpc.Client>;
  private readonly journal = new Journal();
  /** Jobs the run submitted that were accepted, and the fixtures: their keys are theirs to change. */
  private readonly jobs = new Set<string>();
  private readonly listed = listedValues();
  /** Gives up the call in flight (see callRaw). */
  private readonly abandon: { now?: () => void } = {};
  /** Unhandled rejections of this process since the call in flight began. */
  private rejections: unknown[] = [];

  constructor(private readonly cell: FuzzCell) {
    this.plan = plan(protoRoot());
    this.bases = validBases(cell.fixtures);
    this.jobs.add(cell.fixtures.jobId);
    const addr = (service: string): string => (service === 'tarcil.v1.NodeMonitor' ? cell.monitorAddr : cell.schedulerAddr);
    this.clients = new Map([...new Set(this.plan.rpcs.map((r) => r.service))].map((s) => [s, rawClient(addr(s), this.plan.rpcs, s)]));
  }

  /**
   * Told of an unhandled rejection of this process (the server runs in it): it is counted against
   * the call in flight, and that call is given up shortly after (a server whose answer failed never
   * sends it, and waiting for the deadline would find nothing more).
   */
  rejected(e: unknown): void {
    this.rejections.push(e);
    setTimeout(() => this.abandon.now?.(), 200).unref();
  }

  async run(o: RunOptions): Promise<RunResult> {
    const t0 = performance.now();
    await this.journal.start(this.cell.store);
    const all = casesOf(this.plan, o);
    const cases = o.only ? all.filter((c) => o.only?.includes(c.n)) : all;
    const outcomes: Outcome[] = [];
    const findings: Finding[] = [];
    const health: string[] = [];
    const covered = new Set<string>();
    const coveredKinds = new Set<string>();
    try {
      for (const [i, c] of cases.entries()) {
        const out = await this.one(c, o);
        outcomes.push(out);
        for (const m of c.mutations) {
          covered.add(`${c.rpc} ${m.path}`);
          coveredKinds.add(`${c.rpc} ${m.path} ${m.kind}`);
        }
        for (const what of out.findings) {
          const inc = out.status === 'INTERNAL' || out.status === 'UNKNOWN' ? this.cell.log.incident(out.details) : undefined;
          const serverLog = inc ? `${inc.err ?? ''}\n${inc.stack ?? ''}` : out.serverLog;
          findings.push({ seed: o.seed, o: out, what, ...(serverLog ? { serverLog } : {}) });
        }
        o.onOutcome?.(out);
        if ((i + 1) % (o.healthEvery ?? 100) === 0 || out.findings.length > 0) {
          const h = await this.healthy();
          if (h) health.push(`after ${describeCase(o.seed, c)}: ${h}`);
        }
      }
      const h = await this.healthy();
      if (h) health.push(`at the end: ${h}`);
    } finally {
      await this.journal.close();
    }
    return { seed: o.seed, outcomes, findings, health, covered, coveredKinds, ms: performance.now() - t0 };
  }

  private async one(c: FuzzCase, o: RunOptions): Promise<Outcome> {
    const { site, bytes } = buildCase(c, this.plan.byKey, this.bases, o.seed);
    const rpc = site.rpc;
    const client = this.clients.get(rpc.service);
    if (!client) throw new Error(`no client for ${rpc.service}`);
    const store = this.cell.store;
    const before = await store.revision();
    // A large request takes longer to send and to check: 1 ms more per 100 bytes.
    const deadlineMs = (o.deadlineMs ?? 15_000) + Math.round(bytes.length / 100);
    this.rejections = [];
    const a = await callRaw(client, rpc.method, rpc.responseStream, bytes, deadlineMs, o.streamCapMs ?? 5000, this.abandon);
    const after = await store.revision();
    await this.journal.upTo(after);
    const status = a.abandoned ? 'UNANSWERED' : codeName(a.code);
    const findings: string[] = [];
    let serverLog: string | undefined;
    for (const e of this.rejections) {
      findings.push(
        `an unhandled rejection in the process during the call${a.abandoned ? ', which was never answered' : ''}: ${(e instanceof Error ? e.message : String(e)).slice(0, 300)}`,
      );
      serverLog ??= e instanceof Error ? e.stack : String(e);
    }
    // A job accepted: its keys are its own from now on.
    if (a.code === S.OK && rpc.name === 'Scheduler/SubmitJob' && a.messages[0]) {
      const id = (rpc.res.toObject(rpc.res.decode(a.messages[0])) as { jobId?: string }).jobId;
      if (id) this.jobs.add(id);
    }
    const changes = this.journal.take(before, after);
    const stored = a.code === S.OK ? [] : this.unexplained(changes);
    if (a.abandoned) {
      // Said above.
    } else if (a.code === S.INTERNAL || a.code === S.UNKNOWN) findings.push(`${status} is never a documented answer`);
    else if (a.code === S.DEADLINE_EXCEEDED) findings.push(`no answer within ${deadlineMs} ms`);
    else {
      const allowed = DOCUMENTED[rpc.name];
      if (!allowed) findings.push(`no documented statuses for ${rpc.name} (add them to DOCUMENTED)`);
      // Any RPC refuses a request that does not parse as its message (the proto's header says so).
      else if (
        !allowed.includes(status as Code) &&
        !(a.code === S.RESOURCE_EXHAUSTED && bytes.length > MAX_REQUEST_BYTES) &&
        !(a.code === S.INVALID_ARGUMENT && a.details.startsWith('request: does not parse as the request message of'))
      )
        findings.push(`${status} is not among the documented answers of ${rpc.name} (${allowed.join(', ')})`);
    }
    if (stored.length > 0)
      findings.push(`refused, yet the store changed: ${stored.slice(0, 5).join(', ')}${stored.length > 5 ? ` and ${stored.length - 5} more` : ''}`);
    if (a.code === S.OK) findings.push(...this.wronglyAccepted(c));
    if (a.open && a.messages.length === 0) findings.push(`the stream sent nothing and did not end within ${o.streamCapMs ?? 5000} ms`);
    for (const m of a.messages) {
      try {
        rpc.res.decode(m);
      } catch (e) {
        findings.push(`an answer does not decode as ${rpc.res.name}: ${e instanceof Error ? e.message : String(e)}`);
        break;
      }
    }
    // What an accepted call started (a job placed, run and finished; a drain) ends before the next call.
    if (changes.some((ch) => !this.ignored(ch.key))) await this.quiet();
    return {
      c,
      bytes: bytes.length,
      status,
      details: a.details,
      ms: a.ms,
      stored,
      changes: changes.filter((ch) => !this.ignored(ch.key)).length,
      findings,
      ...(serverLog ? { serverLog } : {}),
    };
  }

  /** What an accepted request should not have held: a value outside a field's listed ones, a number that is not finite. */
  private wronglyAccepted(c: FuzzCase): string[] {
    const out: string[] = [];
    // Bytes that do not parse as written may be read as other fields, or not at all: what the
    // server got is then not what a mutation says.
    if (c.mutations.some((m) => corrupts(this.plan.byKey.get(`${c.rpc} ${m.path}`) as Site, m.kind))) return out;
    for (const m of c.mutations) {
      const site = this.plan.byKey.get(`${c.rpc} ${m.path}`) as Site;
      const step = site.steps[site.steps.length - 1];
      if (!step) continue;
      // User-keyed maps refuse the key __proto__ (src/util/dict.ts): a plain object would drop it.
      if (step.part === 'key' && m.kind === 'key-proto') out.push(`accepted ${m.path} ← __proto__: a map key __proto__ is refused`);
      if (step.part === 'key') continue;
      const values = this.listed.get(step.field.fullName);
      if (values && NONEMPTY_STRING_KINDS.has(m.kind)) out.push(`accepted ${m.path} ← ${m.kind}, documented as one of ${values.join(' | ')}`);
      if (site.leaf.kind === 'scalar' && (site.leaf.type === 'double' || site.leaf.type === 'float') && NON_FINITE_KINDS.has(m.kind))
        out.push(`accepted ${m.path} ← ${m.kind}: numbers must be finite`);
    }
    return out;
  }

  /** Audit records and the housekeeper's election: written by every call, or by nobody's call. */
  private ignored(key: string): boolean {
    return key.startsWith(this.cell.keys.audits()) || key.startsWith('election/');
  }

  /** A job's key: `<collection>/<id>[/...]` with an id `j-...` or `<ns>/j-...`. */
  private jobOf(key: string): string | undefined {
    const p = this.cell.keys.prefix;
    if (!key.startsWith(p)) return undefined;
    const parts = key.slice(p.length).split('/');
    if (!['jobs', 'tasks', 'owners', 'queue', 'decisions', 'reports'].includes(parts[0] ?? '')) return undefined;
    return parts[1]?.startsWith('j-') ? parts[1] : parts[2]?.startsWith('j-') ? `${parts[1]}/${parts[2]}` : undefined;
  }

  /** The changed keys no call of the run accounts for (see the file's header). */
  private unexplained(changes: Change[]): string[] {
    const own = new Set<number>();
    for (const ch of changes) {
      const job = this.jobOf(ch.key);
      if (job !== undefined && this.jobs.has(job)) own.add(ch.revision);
    }
    return changes.filter((ch) => !this.ignored(ch.key) && !own.has(ch.revision)).map((ch) => ch.key);
  }

  /** Waits until the store has not changed for 15 ms (at most 5 s). */
  private async quiet(): Promise<void> {
    const store = this.cell.store;
    for (const t0 = Date.now(); Date.now() - t0 < 5000;) {
      const r = await store.revision();
      await new Promise((res) => setTimeout(res, 15));
      if ((await store.revision()) === r) break;
    }
    const now = await store.revision();
    await this.journal.upTo(now);
    this.journal.take(0, now);
  }

  /** undefined when grpc.health.v1 Check answers SERVING and a valid GetCluster works; what is wrong otherwise. */
  async healthy(): Promise<string | undefined> {
    const addr = this.cell.schedulerAddr;
    const Health = grpc.makeGenericClientConstructor(healthService, 'Health');
    const h = new Health(addr, grpc.credentials.createInsecure()) as unknown as {
      Check: (req: object, opts: object, cb: (e: grpc.ServiceError | null, r?: { status?: string | number }) => void) => void;
      close(): void;
    };
    try {
      const st = await new Promise<string>((resolve) =>
        h.Check({ service: '' }, { deadline: new Date(Date.now() + 5000) }, (e, r) => resolve(e ? `${codeName(e.code)} ${e.details}` : String(r?.status))),
      );
      if (st !== 'SERVING' && st !== '1') return `grpc.health.v1 Check answered ${st}`;
    } finally {
      h.close();
    }
    const cluster = this.plan.rpcs.find((r) => r.name === 'Scheduler/GetCluster');
    const client = this.clients.get('tarcil.v1.Scheduler');
    if (!cluster || !client) return 'no GetCluster';
    const a = await callRaw(client, 'GetCluster', false, Buffer.alloc(0), 5000, 1000);
    if (a.code !== S.OK) return `GetCluster answered ${codeName(a.code)}: ${a.details}`;
    const c = cluster.res.toObject(cluster.res.decode(a.messages[0] ?? Buffer.alloc(0))) as { servers?: unknown[] };
    if ((c.servers?.length ?? 0) === 0) return 'GetCluster shows no server';
    return undefined;
  }
}

/** Requests, statuses and findings by RPC, as lines. */
export function summarize(r: RunResult): string[] {
  const byRpc = new Map<string, { n: number; statuses: Map<string, number> }>();
  for (const o of r.outcomes) {
    let e = byRpc.get(o.c.rpc);
    if (!e) byRpc.set(o.c.rpc, (e = { n: 0, statuses: new Map() }));
    e.n++;
    e.statuses.set(o.status, (e.statuses.get(o.status) ?? 0) + 1);
  }
  const lines = [
    `${r.outcomes.length} requests in ${(r.ms / 1000).toFixed(1)} s (seed ${r.seed}); ${r.findings.length} finding(s); health ${r.health.length === 0 ? 'SERVING throughout' : r.health.join('; ')}`,
  ];
  for (const [rpc, e] of [...byRpc].sort())
    lines.push(
      `  ${rpc.padEnd(28)} ${String(e.n).padStart(5)}  ${[...e.statuses]
        .sort((a, b) => b[1] - a[1])
        .map(([s, n]) => `${s} ${n}`)
        .join(', ')}`,
    );
  return lines;
}

/** Findings grouped by RPC, status and what was wrong, with one example case each. */
export function groupFindings(r: RunResult): Array<{ key: string; count: number; example: Finding }> {
  const groups = new Map<string, { key: string; count: number; example: Finding }>();
  for (const f of r.findings) {
    const key = `${f.o.c.rpc} ${f.o.status} ${f.what.replace(/\d+/g, 'N')} ${f.o.details.replace(/incident e-[0-9a-f]+/, 'incident …').slice(0, 120)}`;
    const g = groups.get(key);
    if (g) g.count++;
    else groups.set(key, { key, count: 1, example: f });
  }
  return [...groups.values()];
}
