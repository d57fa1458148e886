/**
 * The client side of a fault-injection run: a steady, seeded stream of jobs whose tasks run the
 * cell's task script, submitted with the project's retrying client (submitWithRetry, one
 * idempotency key per job, kept across retries and across front-ends; the clients' channels dial a
 * front-end that is back within about a second, retryingClient), and cancelled now and then.
 * Records what each submission and cancellation was told, and when a client gave up, for the checker.
 */
import type { SchedulerClient } from '../../src/rpc/gen/tarcil/v1/Scheduler.ts';
import { retryingClient, submitWithRetry } from '../../src/cli/client.ts';
import type { Rng } from '../../src/util/rng.ts';

const PROFILES = ['spark-lr', 'hadoop-map', 'memcached', 'tpch-scan', 'spec-mcf', 'parsec-canneal'];
/** Answers that mean the request was judged and refused, so trying again cannot help. */
const PERMANENT = new Set(['INVALID_ARGUMENT', 'FAILED_PRECONDITION', 'ALREADY_EXISTS', 'NOT_FOUND', 'RESOURCE_EXHAUSTED']);

export interface Submission {
  name: string;
  requestId: string;
  tasks: number;
  submittedAt: number;
  jobId?: string;
  ackAt?: number;
  /** Why it was not acknowledged: the last error code (permanent, or transient until the deadline). */
  refused?: string;
  /** When its client gave up (not acknowledged), and when its deadline was. */
  gaveUpAt?: number;
  deadlineAt?: number;
  cancelAskedAt?: number;
  cancelAckAt?: number;
}

export interface WorkloadOptions {
  rng: Rng;
  addrs: readonly string[];
  taskScript: string;
  recordsFile: string;
  /** Mean time between submissions, ms (exponential gaps). */
  meanGapMs?: number;
  /** Task durations, s: most are short, a share are long (longer than a lease TTL). */
  taskSeconds?: [number, number];
  longShare?: number;
  longSeconds?: [number, number];
  maxTasks?: number;
  cancelProbability?: number;
  /** A submission is given up (not acknowledged) after this long. */
  submitDeadlineMs?: number;
  /**
   * Each submission tries one front-end only (its number modulo the front-ends) until its
   * deadline, as `tarcil submit --deadline` does (submitWithRetry by deadline); otherwise a failed
   * try moves on to the next front-end.
   */
  sticky?: boolean;
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
/** gRPC status numbers by name, for errors that come straight from @grpc/grpc-js. */
const GRPC_NAMES: Record<number, string> = {
  1: 'CANCELLED',
  3: 'INVALID_ARGUMENT',
  4: 'DEADLINE_EXCEEDED',
  5: 'NOT_FOUND',
  6: 'ALREADY_EXISTS',
  8: 'RESOURCE_EXHAUSTED',
  9: 'FAILED_PRECONDITION',
  13: 'INTERNAL',
  14: 'UNAVAILABLE',
};
const codeOf = (err: unknown): string => {
  const c = (err as { code?: unknown }).code;
  return typeof c === 'number' ? (GRPC_NAMES[c] ?? `grpc ${c}`) : typeof c === 'string' ? c : 'UNKNOWN';
};

export class Workload {
  readonly submissions: Submission[] = [];
  private readonly clients: SchedulerClient[];
  private readonly inflight = new Set<Promise<void>>();
  private running = false;
  private loop: Promise<void> | undefined;

  constructor(private readonly o: WorkloadOptions) {
    this.clients = o.addrs.map((a) => retryingClient({ server: a }));
  }

  start(): void {
    this.running = true;
    this.loop = (async (): Promise<void> => {
      const mean = this.o.meanGapMs ?? 600;
      while (this.running) {
        this.track(this.submitOne(this.submissions.length));
        await sleep(Math.min(mean * 4, -Math.log(1 - this.o.rng.next()) * mean));
      }
    })();
  }

  /** Stops submitting; resolves when every submission and cancellation in flight has an answer. */
  async stop(): Promise<void> {
    this.running = false;
    await this.loop;
    while (this.inflight.size > 0) await Promise.allSettled([...this.inflight]);
    for (const c of this.clients) c.close();
  }

  acked(): Submission[] {
    return this.submissions.filter((s) => s.jobId !== undefined);
  }

  private track(p: Promise<void>): void {
    this.inflight.add(p);
    void p.finally(() => this.inflight.delete(p));
  }

  private async submitOne(i: number): Promise<void> {
    const rng = this.o.rng;
    const long = rng.next() < (this.o.longShare ?? 0.2);
    const [lo, hi] = long ? (this.o.longSeconds ?? [6, 12]) : (this.o.taskSeconds ?? [0.5, 2.5]);
    const tasks = 1 + rng.int(this.o.maxTasks ?? 3);
    const secs = (lo + rng.next() * (hi - lo)).toFixed(2);
    const gang = tasks > 1 && rng.next() < 0.15;
    const name = `fault-${i}`;
    const spec = {
      name,
      profile: PROFILES[rng.int(PROFILES.length)],
      tasks,
      mode: gang ? 'gang' : 'incremental',
      maxQueueMs: 2000,
      command: { argv: ['sh', this.o.taskScript, secs], env: { FAULT_RECORDS: this.o.recordsFile } },
    };
    const sub: Submission = { name, requestId: `req-${process.pid}-${Date.now()}-${i}`, tasks, submittedAt: Date.now() };
    this.submissions.push(sub);
    const cancel = rng.next() < (this.o.cancelProbability ?? 0.08) ? 200 + rng.int(3000) : undefined;
    const deadline = sub.submittedAt + (this.o.submitDeadlineMs ?? 30_000);
    sub.deadlineAt = deadline;
    const specJson = JSON.stringify(spec);
    if (this.o.sticky) {
      try {
        const c = this.clients[i % this.clients.length] as SchedulerClient;
        const res = await submitWithRetry(
          c,
          { specJson, requestId: sub.requestId },
          { timeout: 4000, deadlineMs: Math.max(1, deadline - Date.now()), retryBaseMs: 200 },
        );
        sub.jobId = res.jobId;
        sub.ackAt = Date.now();
      } catch (err) {
        sub.refused = codeOf(err);
        sub.gaveUpAt = Date.now();
      }
    }
    for (let k = i; !this.o.sticky && Date.now() < deadline; k++) {
      const c = this.clients[k % this.clients.length] as SchedulerClient;
      try {
        const res = await submitWithRetry(c, { specJson, requestId: sub.requestId }, { timeout: 4000, retries: 2, retryBaseMs: 200 });
        sub.jobId = res.jobId;
        sub.ackAt = Date.now();
        delete sub.refused;
        break;
      } catch (err) {
        sub.refused = codeOf(err);
        if (PERMANENT.has(sub.refused)) return;
        await sleep(200);
      }
    }
    if (sub.jobId === undefined) sub.gaveUpAt ??= Date.now();
    if (sub.jobId !== undefined && cancel !== undefined) {
      await sleep(cancel);
      await this.cancel(sub, sub.jobId);
    }
  }

  private async cancel(sub: Submission, jobId: string): Promise<void> {
    sub.cancelAskedAt = Date.now();
    for (let k = 0; k < 6; k++) {
      const c = this.clients[k % this.clients.length] as SchedulerClient;
      try {
        await new Promise<void>((resolve, reject) => {
          c.CancelJob({ jobId }, { deadline: new Date(Date.now() + 4000) }, (err) => (err ? reject(err) : resolve()));
        });
        sub.cancelAckAt = Date.now();
        return;
      } catch (err) {
        if (PERMANENT.has(codeOf(err))) return;
        await sleep(300);
      }
    }
  }
}
