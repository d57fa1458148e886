/**
 * The Scheduler gRPC service: SubmitJob, GetJob, ListJobs, WatchJob, CancelJob, ExplainJob,
 * GetCluster and GetProfile over the job manager and the store; the namespace and token RPCs from
 * namespace-service.ts and acl-service.ts. Who may call what is the auth layer's (auth.ts).
 */
import type * as grpc from '@grpc/grpc-js';
import { randomBytes } from 'node:crypto';
import type { JobManager } from '../owner/manager.ts';
import {
  isFinalJob,
  LiveKeys,
  type LiveJobRecord,
  type LiveServerRecord,
  type LiveTaskRecord,
  type LoadReportRecord,
  type OwnerRecord,
  type StoredDecisions,
} from '../state/live-records.ts';
import { parseJson, ruRecordsByServer } from '../state/records.ts';
import { blockEntries, entryRecord, type BlockEntry } from '../state/task-chunks.ts';
import { agedOutMessage, DEFAULT_RETAIN_MS } from '../state/retention.ts';
import { parseJobSpec, type Catalog } from '../model/catalog.ts';
import type { RuRecord } from '../model/types.ts';
import type { Keys } from '../state/keys.ts';
import type { ClusterStore } from '../store/types.ts';
import type { Clock } from '../util/clock.ts';
import { errorMessage, invalid, isTarcilError, TarcilError } from '../util/errors.ts';
import type { Logger } from '../util/log.ts';
import { explanationToProto, jobToProto, serverToProto, specInputFromProto } from './convert.ts';
import { readJobReason, reasonToProto } from './job-reason.ts';
import type { Cluster } from '../rpc/gen/tarcil/v1/Cluster.ts';
import type { ProfileEstimate } from '../rpc/gen/tarcil/v1/ProfileEstimate.ts';
import { readProfile } from '../state/profiles.ts';
import type { Job } from '../rpc/gen/tarcil/v1/Job.ts';
import type { JobEvent } from '../rpc/gen/tarcil/v1/JobEvent.ts';
import type { WatchJobRequest__Output } from '../rpc/gen/tarcil/v1/WatchJobRequest.ts';
import type { SchedulerHandlers } from '../rpc/gen/tarcil/v1/Scheduler.ts';
import type { SubmitJobRequest__Output } from '../rpc/gen/tarcil/v1/SubmitJobRequest.ts';
import { deadlineExceeded, remainingMs, unaryStatus } from '../rpc/grpc.ts';
import { blockPrefix, DEFAULT_JOB_WATCH_LIMITS, JobStream, JobWatchHub, SNAPSHOT_BLOCK, type JobWatchLimits } from './job-watch.ts';
import type { Metrics } from './metrics.ts';
import { cordonLines, cordonsOf, departedServers, setNodeScheduling, taskLogs, type NodeServiceDeps } from './node-service.ts';
import { laterTurn, onLaterTurn } from '../util/turns.ts';
import { DEFAULT_NAMESPACE, namespaceOfJob, qualifiedJobId } from '../tenancy/namespace.ts';
import { checkQuotaFit, namespaceForSubmit, requireNamespaceName, waitingJobsGate, type NamespaceCopy } from '../tenancy/namespaces.ts';
import { jobIdOf, requireId } from './job-id.ts';
import { CellExecutors } from './executor-fit.ts';
import { readableNamespaces } from './list-filter.ts';
import { aclHandlers } from './acl-service.ts';
import { auditRide } from './auth.ts';
import { deleteNamespaceRpc, listNamespaces, putNamespaceRpc } from './namespace-service.ts';
import { isRecord } from '../model/schema.ts';
import { clip, wellFormed } from '../util/text.ts';

export interface SchedulerServiceDeps {
  manager: JobManager;
  store: ClusterStore;
  keys: Keys;
  catalog: Catalog;
  clock: Clock;
  log: Logger;
  metrics?: Metrics;
  /** Largest job spec accepted, as JSON (default 64 KiB; etcd caps a request at 1.5 MiB). */
  maxSpecBytes?: number;
  /** WatchJob buffers and the slow-client rule (see job-watch.ts). */
  watchLimits?: Partial<JobWatchLimits>;
  /** How long finished jobs are kept (`--retain`): said when a job is not found. */
  retainMs?: number;
  /** The front-end's process name (written with a cordon). */
  process?: string;
  /** Reaches a node's NodeMonitor for TaskLogs. */
  readLog?: NodeServiceDeps['readLog'];
  /** Told of a token created or revoked (the auth layer's cache drops what it knew). */
  onTokenChanged?: (accessor: string) => void;
  /** The namespace records as this front-end follows them (without it, every submission reads its namespace from the store). */
  namespaces?: NamespaceCopy;
}

/**
 * GetJob lists a page of at most this many tasks (its default page): a 100,000-task job would not
 * fit a 4 MiB message, and serializing 5,000 tasks held the event loop for about 75 ms.
 */
export const MAX_TASKS_LISTED = 1000;
/** A GetJob page from the request: task_from, and task_limit (0: the default) up to the maximum. */
function taskPage(from: number | undefined, limit: number | undefined): { from: number; limit: number } {
  const l = limit ?? 0;
  if (l > MAX_TASKS_LISTED) throw invalid('task_limit', `must be at most ${MAX_TASKS_LISTED} (got ${l})`);
  return { from: from ?? 0, limit: l === 0 ? MAX_TASKS_LISTED : l };
}

/** Task records GetJob parses per turn of the event loop. */
const PARSE_SLICE = 1000;

const JOB_STATES: ReadonlySet<string> = new Set<LiveJobRecord['state']>(['queued', 'admitted', 'placed', 'running', 'succeeded', 'failed', 'cancelled']);

const DEFAULT_MAX_SPEC_BYTES = 64 * 1024;

/** Job ids: sortable by submission time, unique across front-end processes. */
export function newJobId(now: number): string {
  return `j-${now.toString(36)}-${randomBytes(4).toString('hex')}`;
}

/**
 * The Scheduler service. Every handler reads and writes the store, so any front-end process
 * answers for any job, whichever process owns it.
 */
export class SchedulerService {
  private readonly d: SchedulerServiceDeps;
  private readonly live: LiveKeys;
  private readonly hub: JobWatchHub;
  private readonly watchLimits: JobWatchLimits;
  private readonly retainMs: number;
  /** What the cell's nodes run, for the submission's check of a spec's command (executor-fit.ts). */
  private readonly executors: CellExecutors;

  constructor(deps: SchedulerServiceDeps) {
    this.d = deps;
    this.executors = new CellExecutors(deps.manager.servers, deps.clock);
    this.live = new LiveKeys(deps.keys);
    this.hub = new JobWatchHub(deps.store, deps.keys);
    this.watchLimits = { ...DEFAULT_JOB_WATCH_LIMITS, ...deps.watchLimits };
    this.retainMs = deps.retainMs ?? DEFAULT_RETAIN_MS;
  }

  /** A job that is not stored: unknown, or finished longer ago than the retention period. */
  private notFound(id: string): TarcilError {
    return new TarcilError('NOT_FOUND', agedOutMessage(id, this.retainMs), { field: 'job_id', details: { retainMs: this.retainMs } });
  }

  /** Validates a request into a job, or throws INVALID_ARGUMENT naming the field and the rule. */
  parseRequest(req: SubmitJobRequest__Output, now: number): ReturnType<typeof parseJobSpec> {
    const max = this.d.maxSpecBytes ?? DEFAULT_MAX_SPEC_BYTES;
    let input: unknown;
    if (req.specJson !== '') {
      if (req.spec) throw invalid('spec', 'give either spec or spec_json, not both');
      if (Buffer.byteLength(req.specJson) > max) throw invalid('spec_json', `must be at most ${max} bytes`);
      try {
        input = JSON.parse(req.specJson) as unknown;
      } catch (e) {
        // The parser's message may quote half an emoji (a lone surrogate): no status could carry it.
        throw invalid('spec_json', `must be valid JSON (${wellFormed(errorMessage(e))})`);
      }
    } else if (req.spec) {
      input = specInputFromProto(req.spec);
    } else {
      throw invalid('spec', 'is required (or spec_json)');
    }
    const specNs = isRecord(input) && typeof input['namespace'] === 'string' ? input['namespace'] : '';
    if (req.namespace !== '' && specNs !== '' && req.namespace !== specNs)
      throw invalid('namespace', `the request says ${clip(req.namespace, 70)} and the spec ${clip(specNs, 70)}: give one, or the same`);
    const ns = requireNamespaceName(req.namespace || specNs || DEFAULT_NAMESPACE);
    const job = parseJobSpec(input, this.d.catalog, { id: qualifiedJobId(ns, newJobId(now)), now });
    if (ns !== DEFAULT_NAMESPACE) job.namespace = ns;
    if (Buffer.byteLength(JSON.stringify(job)) > max) throw invalid('(root)', `the job spec must be at most ${max} bytes as JSON`);
    return job;
  }

  handlers(): SchedulerHandlers {
    return {
      ...aclHandlers({ store: this.d.store, keys: this.d.keys, clock: this.d.clock, ...(this.d.onTokenChanged ? { onChanged: this.d.onTokenChanged } : {}) }),
      SubmitJob: (call, cb) => {
        void this.submit(call.request, call).then(
          (r) => cb(null, r),
          (e: unknown) => {
            if (isTarcilError(e, 'INVALID_ARGUMENT')) this.d.metrics?.rejected.inc();
            cb(unaryStatus(e));
          },
        );
      },
      GetJob: (call, cb) => {
        void Promise.resolve()
          .then(() => this.getJob(jobIdOf(call.request), true, taskPage(call.request.taskFrom, call.request.taskLimit)))
          .then(
            (r) => cb(null, r),
            (e: unknown) => cb(unaryStatus(e)),
          );
      },
      WatchJob: (call) => this.watchJob(call),
      CancelJob: (call, cb) => {
        void Promise.resolve()
          .then(async () => {
            const id = jobIdOf(call.request);
            await this.d.manager.cancel(id).catch((e: unknown) => {
              throw isTarcilError(e, 'NOT_FOUND') ? this.notFound(id) : e;
            });
            return this.getJob(id, false);
          })
          .then(
            (r) => cb(null, r),
            (e: unknown) => cb(unaryStatus(e)),
          );
      },
      ListJobs: (call, cb) => {
        void Promise.resolve()
          .then(() =>
            this.listJobs(
              call.request.states,
              call.request.limit,
              call.request.allNamespaces ? undefined : requireNamespaceName(call.request.namespace || DEFAULT_NAMESPACE),
              readableNamespaces(call),
            ),
          )
          .then(
            ({ jobs, total }) => cb(null, { jobs, total, retainMs: this.retainMs }),
            (e: unknown) => cb(unaryStatus(e)),
          );
      },
      GetCluster: (_call, cb) => {
        void this.cluster().then(
          (r) => cb(null, r),
          (e: unknown) => cb(unaryStatus(e)),
        );
      },
      SetNodeScheduling: (call, cb) => {
        void setNodeScheduling(this.nodeDeps(), call.request).then(
          (r) => cb(null, r),
          (e: unknown) => cb(unaryStatus(e)),
        );
      },
      TaskLogs: (call) => taskLogs(this.nodeDeps(), call),
      ExplainJob: (call, cb) => {
        void Promise.resolve()
          .then(() => this.explain(jobIdOf(call.request)))
          .then(
            (r) => cb(null, r),
            (e: unknown) => cb(unaryStatus(e)),
          );
      },
      ListNamespaces: (_call, cb) => {
        void listNamespaces(this.d.store, this.d.keys).then(
          (namespaces) => cb(null, { namespaces }),
          (e: unknown) => cb(unaryStatus(e)),
        );
      },
      PutNamespace: (call, cb) => {
        void Promise.resolve()
          .then(() => putNamespaceRpc(this.d.store, this.d.keys, call.request, this.d.clock.now()))
          .then(
            (r) => cb(null, r),
            (e: unknown) => cb(unaryStatus(e)),
          );
      },
      DeleteNamespace: (call, cb) => {
        void Promise.resolve()
          .then(() => deleteNamespaceRpc(this.d.store, this.d.keys, call.request.name))
          .then(
            (r) => cb(null, r),
            (e: unknown) => cb(unaryStatus(e)),
          );
      },
      GetProfile: (call, cb) => {
        void Promise.resolve()
          .then(() => this.profile(call.request.name))
          .then(
            (r) => cb(null, r),
            (e: unknown) => cb(unaryStatus(e)),
          );
      },
    };
  }

  /** A class's declared and learned vectors (state/profiles.ts). */
  private async profile(name: string): Promise<ProfileEstimate> {
    if (typeof name !== 'string' || name === '') throw invalid('name', 'must name a workload profile');
    const stored = await readProfile(this.d.store, this.d.keys, name);
    const declared = stored?.declared ?? this.d.catalog.workloads.get(name)?.caused;
    if (!declared) throw new TarcilError('NOT_FOUND', `no workload profile ${name} in the catalog, and none learned from jobs`, { field: 'name' });
    const book = this.d.manager.profiles;
    const out: ProfileEstimate = {
      name,
      declared: [...declared],
      learned: [],
      gain: 1,
      observations: 0,
      rmse: 0,
      updatedAtMs: 0,
      used: false,
      minObservations: book.minObservations,
    };
    if (stored) {
      Object.assign(out, {
        learned: stored.learned,
        gain: stored.gain,
        observations: stored.observations,
        rmse: Math.sqrt(stored.mse),
        updatedAtMs: stored.updatedAt,
      });
      out.used = book.usesLearned && stored.observations >= book.minObservations;
    }
    return out;
  }

  private async submit(
    req: SubmitJobRequest__Output,
    call: { getDeadline(): grpc.Deadline; cancelled: boolean },
  ): Promise<{ jobId: string; job: Job; warnings: string[] }> {
    const now = this.d.clock.now();
    const job = this.parseRequest(req, now);
    // A spec the cell's executors cannot run as it asks: refused, or accepted with a warning.
    const warnings = this.executors.check(job);
    // Nothing is written for a call whose caller has already given up.
    if (call.cancelled || remainingMs(call) <= 0) throw deadlineExceeded('the job was persisted');
    let r;
    const ride = auditRide(call);
    for (let tries = 1; ; tries++) {
      // The first try reads the namespace from this front-end's copy; a retry (the record changed
      // meanwhile) reads the store.
      const { rec, compare } = await namespaceForSubmit(
        this.d.store,
        this.d.keys,
        job.namespace ?? DEFAULT_NAMESPACE,
        tries === 1 ? this.d.namespaces : undefined,
      );
      checkQuotaFit(rec, job);
      const admit = rec.maxWaitingJobs > 0 ? () => waitingJobsGate(this.d.store, this.d.keys, rec) : undefined;
      // The call's audit record rides in the submission's transaction (frontend/auth.ts auditRide).
      const also = ride ? [ride.put(job.id)] : [];
      try {
        r = await this.d.manager.accept(job, { ...(req.requestId !== '' ? { requestId: req.requestId } : {}), compare, ...(admit ? { admit } : {}), also });
        break;
      } catch (err) {
        // Another submission to the namespace (or a change of it) won the race: count again.
        if (!(isTarcilError(err) && err.code === 'ABORTED' && tries < 20) || call.cancelled || remainingMs(call) <= 0) throw err;
      }
    }
    if (!r.duplicate) {
      this.d.metrics?.submitted.inc();
      ride?.written();
    }
    return { jobId: r.jobId, job: jobToProto(r.jobId, r.record, r.record.owner ?? ''), warnings };
  }

  async getJob(id: string, withTasks: boolean, page: { from: number; limit: number } = { from: 0, limit: MAX_TASKS_LISTED }): Promise<Job> {
    requireId(id);
    const k = this.d.keys;
    const first = Math.floor(page.from / SNAPSHOT_BLOCK);
    // With its tasks, the read (up to a block of records) waits for a turn of its own: requests
    // that arrive together would otherwise each read a block in the same turn.
    if (withTasks) await laterTurn();
    const res = await this.d.store.txn({
      compare: [],
      success: [
        { type: 'get', key: k.job(id) },
        { type: 'get', key: k.owner(id) },
        { type: 'get', key: this.live.jobReports(id), prefix: true },
        // Without its tasks (CancelJob's answer), a 100,000-task job is not read task by task.
        ...(withTasks ? [{ type: 'get' as const, key: blockPrefix(k, id, first), prefix: true }] : []),
        // GetJob's answer carries the job's reason, which reads its decision records.
        ...(withTasks ? [{ type: 'get' as const, key: k.decision(id) }] : []),
      ],
    });
    const rec = parseJson<LiveJobRecord>(res.responses[0]?.[0]);
    if (!rec) throw this.notFound(id);
    const owner = parseJson<OwnerRecord>(res.responses[1]?.[0]);
    const reports = (res.responses[2] ?? []).map((kv) => parseJson<LoadReportRecord>(kv)).filter((r): r is LoadReportRecord => !!r);
    let tasks: LiveTaskRecord[] | undefined;
    let records = 0;
    let next = 0;
    if (withTasks) {
      // The page: from task_from on, block by block (each read on a later turn of the event loop)
      // until `limit` are listed. How many records there are in all is summed when every block
      // was read, otherwise counted by the store, not read.
      tasks = [];
      const blocks = Math.max(1, Math.ceil(rec.spec.tasks / SNAPSHOT_BLOCK));
      let b = first;
      let more = false;
      for (; b < blocks && tasks.length < page.limit; b++) {
        const kvs = b === first ? (res.responses[3] ?? []) : (await onLaterTurn(() => this.d.store.range(blockPrefix(k, id, b)))).kvs;
        // The tasks with a record, their own or their chunk's (state/task-chunks.ts), by index.
        const entries = blockEntries(k, kvs, (key) => this.live.parseTask(key));
        records += entries.size;
        const listed = [...entries.keys()].filter((i) => i >= page.from).sort((x, y) => x - y);
        const take = listed.slice(0, page.limit - tasks.length);
        more = take.length < listed.length;
        // Parsed a slice per turn: 5,000 records and the answer's serialization in one turn held
        // the event loop for tens of milliseconds.
        for (let i = 0; i < take.length; i++) {
          if (i > 0 && i % PARSE_SLICE === 0) await laterTurn();
          const t = entryRecord(entries.get(take[i] as number) as BlockEntry);
          if (t) tasks.push(t);
        }
      }
      if (!more && b < blocks) {
        // The page ended with a block: does any later task have a record?
        for (let c = b; c < blocks && !more; c++) more = (await this.d.store.range(blockPrefix(k, id, c), { limit: 1 })).kvs.length > 0;
      }
      // Counted, not read: a chunk record of tasks that their placement started counts once.
      if (first > 0 || b < blocks) records = (await this.d.store.count(k.tasks(id))).count;
      const last = tasks[tasks.length - 1];
      if (more && last) next = last.index + 1;
    }
    const job = jobToProto(id, rec, owner?.agent ?? rec.owner ?? '', tasks, reports);
    if (tasks && records > tasks.length) job.tasksOmitted = records - tasks.length;
    if (next > 0) job.nextTaskFrom = next;
    if (withTasks) job.reason = reasonToProto(await this.reason(id, rec, parseJson<StoredDecisions>(res.responses[4]?.[0])));
    return job;
  }

  /** The newest `limit` jobs (0: all) of namespace `ns`, or of all when undefined, and how many matched. */
  private async listJobs(states: string[], limit: number, ns: string | undefined, readable?: (ns: string) => boolean): Promise<{ jobs: Job[]; total: number }> {
    states.forEach((st, i) => {
      if (!JOB_STATES.has(st)) throw invalid(`states[${i}]`, `must be one of ${[...JOB_STATES].join(', ')} (got '${clip(st, 40)}')`);
    });
    const res = await this.d.store.range(ns === undefined || ns === DEFAULT_NAMESPACE ? this.d.keys.jobs() : this.d.keys.namespaceJobs(ns));
    const want = new Set(states);
    const out: Job[] = [];
    for (const kv of res.kvs) {
      const rec = parseJson<LiveJobRecord>(kv);
      const id = this.d.keys.tail(this.d.keys.jobs(), kv.key);
      if (!rec || id === undefined) continue;
      if (ns === DEFAULT_NAMESPACE && namespaceOfJob(id) !== DEFAULT_NAMESPACE) continue;
      if (want.size > 0 && !want.has(rec.state)) continue;
      // Over every namespace, a token that may not read them all sees (and counts) only its own.
      if (readable && !readable(namespaceOfJob(id))) continue;
      out.push(jobToProto(id, rec, rec.owner ?? ''));
    }
    out.sort((a, b) => Number(b.submittedAtMs ?? 0) - Number(a.submittedAtMs ?? 0));
    return { jobs: limit > 0 ? out.slice(0, limit) : out, total: out.length };
  }

  private nodeDeps(): NodeServiceDeps {
    return {
      store: this.d.store,
      keys: this.d.keys,
      manager: this.d.manager,
      clock: this.d.clock,
      log: this.d.log,
      ...(this.d.process !== undefined ? { process: this.d.process } : {}),
      ...(this.d.readLog ? { readLog: this.d.readLog } : {}),
      notFound: (id) => this.notFound(id),
    };
  }

  private async cluster(): Promise<Cluster> {
    const k = this.d.keys;
    const res = await this.d.store.txn({
      compare: [],
      success: [
        { type: 'get', key: k.servers(), prefix: true },
        { type: 'get', key: k.rus(), prefix: true },
        { type: 'get', key: k.jobs(), prefix: true },
        { type: 'get', key: k.cordons(), prefix: true },
      ],
    });
    const cordons = cordonsOf(k, res.responses[3] ?? []);
    const rus = ruRecordsByServer(k, res.responses[1] ?? []);
    const registered = (res.responses[0] ?? []).map((kv) => parseJson<LiveServerRecord>(kv)).filter((s): s is LiveServerRecord => !!s);
    // Servers that left lately are shown down (with when they left) rather than vanishing.
    const departed = departedServers(this.d.manager, new Set(registered.map((s) => s.id)), this.d.clock.now());
    const servers = [
      ...registered.map((s) => serverToProto(s, rus.get(s.id) ?? new Map<number, RuRecord>(), cordons.get(s.id))),
      ...departed.map((x) => serverToProto(x.rec, new Map<number, RuRecord>(), cordons.get(x.rec.id), x.leftAt)),
    ].sort((a, b) => (a.id ?? '').localeCompare(b.id ?? ''));
    let queued = 0;
    let active = 0;
    for (const kv of res.responses[2] ?? []) {
      const rec = parseJson<LiveJobRecord>(kv);
      if (!rec || isFinalJob(rec.state)) continue;
      active++;
      if (rec.state === 'queued' || rec.state === 'admitted') queued++;
    }
    const agent = this.d.manager.agents[0];
    const buckets = agent ? agent.admission.snapshot().map((b, i) => ({ id: i, free: b.free, rus: b.total })) : [];
    const all = servers.flatMap((s) => s.rus ?? []);
    return {
      servers,
      rus: all.length,
      free: servers.filter((s) => s.state === 'up').reduce((a, s) => a + (s.free ?? 0), 0),
      busy: all.filter((r) => r.state === 'busy' || r.state === 'reserved').length,
      down: all.filter((r) => r.state === 'down').length,
      // The free RUs no placement may take (blocked, cordoned, draining, drained, down): with
      // these, the four counts add up to the RUs.
      unschedulable: servers.filter((s) => s.state !== 'up').reduce((a, s) => a + (s.free ?? 0), 0),
      buckets,
      queuedJobs: queued,
      activeJobs: active,
    };
  }

  /** The job's one current reason (job-reason.ts). */
  private reason(id: string, rec: LiveJobRecord, stored: StoredDecisions | undefined): ReturnType<typeof readJobReason> {
    return readJobReason({ manager: this.d.manager, store: this.d.store, keys: this.d.keys, now: this.d.clock.now() }, id, rec, stored);
  }

  async explain(id: string): Promise<ReturnType<typeof explanationToProto>> {
    const k = this.d.keys;
    const res = await this.d.store.txn({
      compare: [],
      success: [
        { type: 'get', key: k.job(id) },
        { type: 'get', key: k.decision(id) },
        { type: 'get', key: k.cordons(), prefix: true },
      ],
    });
    const rec = parseJson<LiveJobRecord>(res.responses[0]?.[0]);
    if (!rec) throw this.notFound(id);
    const stored = parseJson<StoredDecisions>(res.responses[1]?.[0]);
    // Tasks placed more than once, with their earlier attempts (a job that lost none reads none),
    // block by block, each read and parsed on its own turn of the event loop.
    const replaced: LiveTaskRecord[] = [];
    if ((rec.rescheduled ?? 0) > 0 || (rec.taskStates?.lost ?? 0) > 0) {
      const blocks = Math.max(1, Math.ceil(rec.spec.tasks / SNAPSHOT_BLOCK));
      for (let b = 0; b < blocks && replaced.length < 50; b++) {
        for (const kv of (await onLaterTurn(() => this.d.store.range(blockPrefix(k, id, b)))).kvs) {
          const t = parseJson<LiveTaskRecord>(kv);
          if (t && (t.attempt > 0 || (t.previous?.length ?? 0) > 0 || t.state === 'lost')) replaced.push(t);
          if (replaced.length >= 50) break;
        }
      }
    }
    const cell = this.d.manager.cell;
    const reason = reasonToProto(await this.reason(id, rec, stored));
    const e = explanationToProto(
      id,
      rec.state,
      stored,
      this.d.manager.inflightDecision(id),
      isFinalJob(rec.state) ? '' : (rec.message ?? ''),
      replaced,
      (sid) => cell.get(sid)?.spec,
      reason,
    );
    // Cordoned and draining nodes (`tarcil node`), while they can matter to the job.
    if (!isFinalJob(rec.state)) {
      const placements = (e.placements ?? []).map((p) => ({ task: p.task ?? 0, server: p.ru?.server ?? '' }));
      const lines = cordonLines(cordonsOf(k, res.responses[2] ?? []), placements);
      if (lines.length > 0) e.text = `${e.text}\n${lines.join('\n')}`;
    }
    // What the cell's executors do with the spec's command (executor-fit.ts).
    const notes = this.executors.notes(rec.spec);
    if (notes.length > 0) e.text = `${e.text}\n${notes.map((n) => `warning: ${n}`).join('\n')}`;
    return e;
  }

  /** The job now, then each change, until it is final or the caller goes away (see job-watch.ts). */
  private watchJob(call: grpc.ServerWritableStream<WatchJobRequest__Output, JobEvent>): void {
    let id = call.request.jobId;
    try {
      id = jobIdOf(call.request);
    } catch {
      // JobStream.start() below reports it, through jobIdOf again.
    }
    const stream = new JobStream(call, id, {
      store: this.d.store,
      keys: this.d.keys,
      hub: this.hub,
      limits: this.watchLimits,
      notFound: () => this.notFound(id),
    });
    void Promise.resolve()
      .then(() => jobIdOf(call.request))
      .then(() => stream.start())
      .catch((e: unknown) => stream.finish(e));
  }
}
