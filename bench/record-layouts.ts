/**
 * What the store's record layout costs a task, measured apart from the scheduler: the same stream
 * of jobs (the soak's mix of sizes, Poisson arrivals, tasks of --task-s) written to a real etcd in
 * six layouts, each followed by the watchers a cell has (--front-ends front-end processes and one
 * process for the node side), and the CPU of every process, the keys written, the write
 * transactions and the watch deliveries counted per task.
 *
 *   per-task            the layout the cell runs: one key per RU (`rus/<server>/<idx>`), one per
 *                       task (`tasks/<job>/<idx>`). A placement writes both per task (one
 *                       transaction per chunk of --chunk picks, comparing each RU's revision), the
 *                       node writes the task running (comparing the RU), and at the end frees the
 *                       RU and writes the outcome in one transaction. Every front-end follows
 *                       `rus/`, `tasks/`, `jobs/`, `owners/`; the node side follows `rus/`.
 *   per-task-no-start   as per-task, without the node's running write: the start time rides in the
 *                       end write (and the job's record is not written at its first start).
 *   per-task-owner      as per-task, with each task's and job's record under its owner
 *                       (`tasks/<owner>/…`, `jobs/<owner>/…`): a front-end follows `rus/`, its own
 *                       tasks and jobs and `owners/`, one watch each.
 *   per-server          one key per server holding its RUs' slots (`cell/<server>`), and each job's
 *                       record under its owner (`jobs/<owner>/<job>`). A placement writes each
 *                       server it touches once (comparing its revision) and the job's record once
 *                       per chunk; the node writes its server's key at a task's start and again at
 *                       its end (slot freed, outcome kept in the slot until the owner folds it);
 *                       the owner folds its jobs' outcomes into their records at most once per
 *                       --fold-ms a job. A front-end follows `cell/`, its own `jobs/<owner>/` and
 *                       `owners/`; the node side follows `cell/`.
 *   per-server-no-start as per-server, without the start write: the start time rides in the end
 *                       write.
 *   per-server-packed   as per-server-no-start, with a job's picks packed: each pick takes every
 *                       free RU of a randomly drawn free RU's server before drawing again, so a
 *                       placement writes as few server keys as the free RUs allow. What a
 *                       placement grouped by server would cost the store (its placement quality
 *                       is not measured here).
 *
 * With --end-batch-ms N > 0, the node of a per-server layout writes its server's key once per N
 * ms for all the ends of that interval, as a node reporting its ends once a second would (a
 * freed RU then waits up to N ms to be seen free); at 0 every end is written at once.
 *
 * Each layout has a cell of its own (a fresh etcd, --servers servers of 16 RUs, seeded), a
 * warm-up of --task-s + 2 s, then a window of --window-s seconds over which everything is
 * counted. The writes come from this process (what the front-ends' agents and the node monitors
 * would send), ordered per key so that no compare fails on the writer's own writes: what this
 * measures is the store's and the watchers' cost of the records, not conflicts.
 *
 * Run: npx tsx bench/record-layouts.ts [--rates 300,900] [--servers 10000] [--front-ends 3]
 *      [--task-s 5] [--window-s 20] [--chunk 42] [--fold-ms 100] [--end-batch-ms 0] [--seed 1]
 *      [--layouts per-task,per-task-no-start,per-task-owner,per-server,per-server-no-start,per-server-packed]
 *      [--name record-layouts]
 * Results: bench/results/record-layouts/<name>.{md,json}.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { loadavg } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { openStore } from '../src/store/index.ts';
import type { ClusterStore, Op, Compare } from '../src/store/types.ts';
import type { PlacedRuRecord } from '../src/state/records.ts';
import { TarcilError } from '../src/util/errors.ts';
import { SeededRng } from '../src/util/rng.ts';
import { ensureEtcd, startEtcd } from '../test/support/etcd.ts';
import { pickSize, MEAN_TASKS } from './lib/jobs.ts';
import { cpuSeconds } from './lib/proc-stats.ts';
import { fmt, machine, mdTable, RESULTS_DIR, writeResults } from './lib/report.ts';

const SELF = import.meta.filename;

function flag(name: string, dflt: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 && process.argv[i + 1] !== undefined ? (process.argv[i + 1] as string) : dflt;
}

const RUS_PER_SERVER = 16;

// ---------------------------------------------------------------- watcher process

/** A watcher: follows its prefixes as a cell's process would (list, then watch; every value parsed). */
async function watcherMain(cfg: { url: string; prefixes: string[] }): Promise<void> {
  const store = await openStore(cfg.url);
  const cache = new Map<string, unknown>();
  let events = 0;
  let bytes = 0;
  for (const prefix of cfg.prefixes) {
    const { revision, kvs } = await store.range(prefix);
    for (const kv of kvs) cache.set(kv.key, JSON.parse(kv.value));
    await store.watch({
      prefix,
      fromRevision: revision + 1,
      onEvents: (b) => {
        for (const e of b.events) {
          events++;
          bytes += e.kv.value.length;
          if (e.type === 'delete') cache.delete(e.kv.key);
          else cache.set(e.kv.key, JSON.parse(e.kv.value));
        }
      },
      onError: (err) => {
        process.stderr.write(`[watcher] ${prefix}: ${err.message}\n`);
        process.exit(3);
      },
    });
  }
  process.stdout.write('ready\n');
  const rl = createInterface({ input: process.stdin });
  for await (const line of rl) {
    if (line === 'count') process.stdout.write(`${JSON.stringify({ events, bytes, cached: cache.size })}\n`);
    if (line === 'exit') break;
  }
  await store.close();
  process.exit(0);
}

class Watcher {
  readonly proc: ChildProcess;
  private readonly lines: string[] = [];
  private waiting: ((l: string) => void) | undefined;
  private exiting = false;

  constructor(url: string, prefixes: string[]) {
    this.proc = spawn(process.execPath, ['--import', 'tsx', SELF, '--watcher', JSON.stringify({ url, prefixes })], { stdio: ['pipe', 'pipe', 'inherit'] });
    this.proc.once('exit', (code, signal) => {
      if (!this.exiting) fail(new Error(`a watcher of ${prefixes.join(', ')} exited (${code ?? signal})`));
    });
    const rl = createInterface({ input: this.proc.stdout! });
    rl.on('line', (l) => {
      const w = this.waiting;
      if (w) {
        this.waiting = undefined;
        w(l);
      } else this.lines.push(l);
    });
  }
  next(): Promise<string> {
    const l = this.lines.shift();
    return l !== undefined ? Promise.resolve(l) : new Promise((r) => (this.waiting = r));
  }
  async count(): Promise<{ events: number; bytes: number }> {
    this.proc.stdin!.write('count\n');
    return JSON.parse(await this.next()) as { events: number; bytes: number };
  }
  cpu(): number {
    return cpuSeconds(this.proc.pid!);
  }
  async stop(): Promise<void> {
    this.exiting = true;
    this.proc.stdin!.write('exit\n');
    await new Promise((r) => this.proc.once('exit', r));
  }
}

// ---------------------------------------------------------------- the writer

type Layout = 'per-task' | 'per-task-no-start' | 'per-task-owner' | 'per-server' | 'per-server-no-start' | 'per-server-packed';
const LAYOUTS: readonly Layout[] = ['per-task', 'per-task-no-start', 'per-task-owner', 'per-server', 'per-server-no-start', 'per-server-packed'];
const perTask = (l: Layout): boolean => l.startsWith('per-task');
/** Layouts whose node writes nothing at a task's start (its start time rides in the end write). */
const noStart = (l: Layout): boolean => l.endsWith('no-start') || l === 'per-server-packed';

interface Counts {
  txns: number;
  keys: number;
  placed: number;
  failed: number;
  /** Transactions the store's adaptive limit did not send (overload), sent again. */
  shed: number;
}

/** Writes to one key (or server) run one after another, so a compare never fails on our own write. */
class KeyChains {
  private readonly tails = new Map<string, Promise<unknown>>();
  run<T>(keys: readonly string[], fn: () => Promise<T>): Promise<T> {
    const before = keys.map((k) => this.tails.get(k)).filter((p): p is Promise<unknown> => p !== undefined);
    const p = Promise.all(before).then(fn);
    const settled = p.catch(() => undefined);
    for (const k of keys) this.tails.set(k, settled);
    void settled.then(() => {
      for (const k of keys) if (this.tails.get(k) === settled) this.tails.delete(k);
    });
    return p;
  }
}

function caused(rng: SeededRng): number[] {
  return Array.from({ length: 10 }, () => Math.round(rng.next() * 100) / 100);
}

/** An RU's slot: the record a placement writes (as the cell writes it), and its start once the node wrote one. */
type Slot = PlacedRuRecord & { startedAt?: number };

interface Ended {
  job: string;
  task: number;
  state: 'succeeded';
  startedAt: number;
  endedAt: number;
  exitCode: 0;
}

interface ServerState {
  rev: number;
  slots: (Slot | null)[];
  /** Outcomes not yet folded by their owners, kept in the server's record until then. */
  ended: Ended[];
  /** Ends waiting for the server's next end write (--end-batch-ms), and its timer. */
  ending: { j: JobRun; ru: number; o: Ended }[];
  endTimer: NodeJS.Timeout | undefined;
}

interface JobRun {
  id: string;
  owner: number;
  tasks: number;
  done: number;
  jobRev: number;
  pendingFold: { o: Ended; s: number }[];
  foldTimer: NodeJS.Timeout | undefined;
}

class Cell {
  readonly counts: Counts = { txns: 0, keys: 0, placed: 0, failed: 0, shed: 0 };
  private readonly chains = new KeyChains();
  private readonly free: number[] = [];
  /** Each free RU's index in `free`, for taking a given RU (packed picks). */
  private readonly freePos = new Map<number, number>();
  private readonly ruRev = new Map<number, number>();
  private readonly servers: ServerState[] = [];
  private readonly rng: SeededRng;
  private seq = 0;
  private inFlight = 0;
  stopped = false;

  constructor(
    private readonly store: ClusterStore,
    private readonly p: string,
    private readonly layout: Layout,
    private readonly n: number,
    private readonly o: { frontEnds: number; taskMs: number; chunk: number; foldMs: number; endBatchMs: number; seed: number },
  ) {
    this.rng = new SeededRng(o.seed);
  }

  private ruKey(ru: number): string {
    return `${this.p}rus/s${String(Math.floor(ru / RUS_PER_SERVER)).padStart(5, '0')}/${String(ru % RUS_PER_SERVER).padStart(3, '0')}`;
  }
  private serverKey(s: number): string {
    return `${this.p}cell/s${String(s).padStart(5, '0')}`;
  }
  private jobKey(j: JobRun): string {
    return this.layout === 'per-task' || this.layout === 'per-task-no-start' ? `${this.p}jobs/${j.id}` : `${this.p}jobs/fe${j.owner}/${j.id}`;
  }
  private taskKey(j: JobRun, task: number): string {
    return this.layout === 'per-task-owner' ? `${this.p}tasks/fe${j.owner}/${j.id}/${task}` : `${this.p}tasks/${j.id}/${task}`;
  }

  private async txn(compare: Compare[], success: Op[]): Promise<number> {
    // After the window the cell stops writing: the timers still pending find it closed.
    if (this.stopped) return 0;
    this.counts.txns++;
    this.counts.keys += success.length;
    let r;
    for (;;) {
      try {
        r = await this.store.txn({ compare, success });
        break;
      } catch (e) {
        if (this.stopped) return 0; // in flight when the window ended and the store closed
        // Not sent (the store's adaptive limit shed it): sent again, and counted.
        if (!(e instanceof TarcilError && e.code === 'UNAVAILABLE' && e.message.includes('was not sent'))) throw e;
        this.counts.shed++;
        await new Promise((res) => setTimeout(res, 100));
      }
    }
    if (!r.succeeded) {
      this.counts.failed++;
      throw new Error(`a compare failed in the ${this.layout} layout (the writer orders its own writes; something else wrote)`);
    }
    return r.revision;
  }

  /** Seeds the cell's RU records (all free). */
  async seed(): Promise<void> {
    const total = this.n * RUS_PER_SERVER;
    for (let ru = 0; ru < total; ru++) this.pushFree(ru);
    const ops: Op[] = [];
    if (perTask(this.layout)) for (let ru = 0; ru < total; ru++) ops.push({ type: 'put', key: this.ruKey(ru), value: '{"state":"free"}' });
    else
      for (let s = 0; s < this.n; s++) {
        this.servers.push({ rev: 0, slots: Array.from({ length: RUS_PER_SERVER }, () => null), ended: [], ending: [], endTimer: undefined });
        ops.push({ type: 'put', key: this.serverKey(s), value: JSON.stringify({ slots: this.servers[s]!.slots, ended: [] }) });
      }
    for (let i = 0; i < ops.length; i += 120) {
      const part = ops.slice(i, i + 120);
      const r = await this.store.txn({ compare: [], success: part });
      for (const op of part) {
        if (perTask(this.layout)) this.ruRev.set(this.ruIndexOf(op.key), r.revision);
        else this.servers[Number(op.key.slice(-5))]!.rev = r.revision;
      }
    }
  }
  private ruIndexOf(key: string): number {
    const m = /s(\d+)\/(\d+)$/.exec(key)!;
    return Number(m[1]) * RUS_PER_SERVER + Number(m[2]);
  }

  /** Submits one job: its record and owner key, then its placement in chunks. */
  async submit(): Promise<void> {
    const size = pickSize(this.rng.next());
    const j: JobRun = { id: `j${++this.seq}`, owner: this.seq % this.o.frontEnds, tasks: size, done: 0, jobRev: 0, pendingFold: [], foldTimer: undefined };
    this.inFlight++;
    try {
      j.jobRev = await this.txn(
        [],
        [
          {
            type: 'put',
            key: this.jobKey(j),
            value: JSON.stringify({ id: j.id, state: 'queued', tasks: size, spec: { tasks: size, profile: 'spark-lr', durationMs: this.o.taskMs } }),
          },
          { type: 'put', key: `${this.p}owners/${j.id}`, value: JSON.stringify({ owner: `fe${j.owner}` }) },
        ],
      );
      for (let first = 0; first < size; first += this.o.chunk) await this.placeChunk(j, first, Math.min(size, first + this.o.chunk));
    } finally {
      this.inFlight--;
    }
  }

  private pushFree(ru: number): void {
    this.freePos.set(ru, this.free.length);
    this.free.push(ru);
  }
  private removeFree(ru: number): void {
    const i = this.freePos.get(ru)!;
    const last = this.free.pop()!;
    if (last !== ru) {
      this.free[i] = last;
      this.freePos.set(last, i);
    }
    this.freePos.delete(ru);
  }
  private takeFree(): number {
    const ru = this.free[Math.floor(this.rng.next() * this.free.length)]!;
    this.removeFree(ru);
    return ru;
  }
  /** `count` free RUs: a random one, then the other free RUs of its server, then another random one… */
  private takePacked(count: number): number[] {
    const out: number[] = [];
    while (out.length < count) {
      const first = this.takeFree();
      out.push(first);
      const base = first - (first % RUS_PER_SERVER);
      for (let ru = base; ru < base + RUS_PER_SERVER && out.length < count; ru++) {
        if (this.freePos.has(ru)) {
          this.removeFree(ru);
          out.push(ru);
        }
      }
    }
    return out;
  }

  private slot(j: JobRun, task: number): Slot {
    return {
      state: 'busy',
      job: j.id,
      task,
      caused: caused(this.rng),
      priority: 0,
      agent: `fe${j.owner}/a${task % 4}`,
      since: Date.now(),
      q: 0.8123,
      basedOn: 0,
      commitId: `c${this.seq}.${task}`,
      attempt: 1,
    };
  }

  private async placeChunk(j: JobRun, from: number, to: number): Promise<void> {
    const picks: { task: number; ru: number }[] = [];
    if (this.layout === 'per-server-packed') {
      const rus = this.takePacked(to - from);
      for (let t = from; t < to; t++) picks.push({ task: t, ru: rus[t - from]! });
    } else for (let t = from; t < to; t++) picks.push({ task: t, ru: this.takeFree() });
    if (perTask(this.layout)) {
      const keys = picks.map((p) => this.ruKey(p.ru));
      await this.chains.run(keys, async () => {
        const compare: Compare[] = picks.map((p) => ({ key: this.ruKey(p.ru), target: 'mod', op: '==', value: this.ruRev.get(p.ru)! }));
        const success: Op[] = [];
        for (const p of picks) {
          const s = this.slot(j, p.task);
          success.push({ type: 'put', key: this.ruKey(p.ru), value: JSON.stringify(s) });
          success.push({
            type: 'put',
            key: this.taskKey(j, p.task),
            value: JSON.stringify({
              job: j.id,
              index: p.task,
              state: 'placed',
              ru: { server: `s${Math.floor(p.ru / RUS_PER_SERVER)}`, index: p.ru % RUS_PER_SERVER },
              attempt: 1,
              placedAt: s.since,
              commitId: s.commitId,
              agent: s.agent,
            }),
          });
        }
        const rev = await this.txn(compare, success);
        for (const p of picks) this.ruRev.set(p.ru, rev);
      });
    } else {
      const byServer = new Map<number, { task: number; idx: number }[]>();
      for (const p of picks) {
        const s = Math.floor(p.ru / RUS_PER_SERVER);
        const l = byServer.get(s) ?? [];
        l.push({ task: p.task, idx: p.ru % RUS_PER_SERVER });
        byServer.set(s, l);
      }
      const servers = [...byServer.keys()];
      await this.chains.run([...servers.map((s) => this.serverKey(s)), this.jobKey(j)], async () => {
        const compare: Compare[] = servers.map((s) => ({ key: this.serverKey(s), target: 'mod', op: '==', value: this.servers[s]!.rev }));
        const success: Op[] = [];
        for (const [s, l] of byServer) {
          const st = this.servers[s]!;
          for (const x of l) st.slots[x.idx] = this.slot(j, x.task);
          success.push({ type: 'put', key: this.serverKey(s), value: JSON.stringify({ slots: st.slots, ended: st.ended }) });
        }
        success.push({ type: 'put', key: this.jobKey(j), value: JSON.stringify({ id: j.id, state: 'placed', tasks: j.tasks, placed: to }) });
        const rev = await this.txn(compare, success);
        for (const s of servers) this.servers[s]!.rev = rev;
        j.jobRev = rev;
      });
    }
    this.counts.placed += picks.length;
    for (const p of picks) {
      if (!noStart(this.layout)) setTimeout(() => void this.start(j, p.task, p.ru).catch(fail), 5);
      const startedAt = Date.now();
      setTimeout(() => void this.end(j, p.task, p.ru, startedAt).catch(fail), this.o.taskMs * (0.5 + this.rng.next()));
    }
  }

  private async start(j: JobRun, task: number, ru: number): Promise<void> {
    if (this.stopped) return;
    if (perTask(this.layout)) {
      await this.chains.run([this.ruKey(ru)], async () => {
        await this.txn(
          [{ key: this.ruKey(ru), target: 'mod', op: '==', value: this.ruRev.get(ru)! }],
          [
            {
              type: 'put',
              key: this.taskKey(j, task),
              value: JSON.stringify({
                job: j.id,
                index: task,
                state: 'running',
                ru: { server: `s${Math.floor(ru / RUS_PER_SERVER)}`, index: ru % RUS_PER_SERVER },
                attempt: 1,
                startedAt: Date.now(),
                server: `s${Math.floor(ru / RUS_PER_SERVER)}`,
                nodeGraceMs: 10000,
              }),
            },
          ],
        );
      });
      if (task === 0)
        await this.chains.run([this.jobKey(j)], () =>
          this.txn([], [{ type: 'put', key: this.jobKey(j), value: JSON.stringify({ id: j.id, state: 'running', tasks: j.tasks }) }]),
        );
    } else {
      const s = Math.floor(ru / RUS_PER_SERVER);
      await this.chains.run([this.serverKey(s)], async () => {
        const st = this.servers[s]!;
        const slot = st.slots[ru % RUS_PER_SERVER];
        if (slot) slot.startedAt = Date.now();
        st.rev = await this.txn(
          [{ key: this.serverKey(s), target: 'mod', op: '==', value: st.rev }],
          [{ type: 'put', key: this.serverKey(s), value: JSON.stringify({ slots: st.slots, ended: st.ended }) }],
        );
      });
    }
  }

  private async end(j: JobRun, task: number, ru: number, startedAt: number): Promise<void> {
    if (this.stopped) return;
    const outcome: Ended = { job: j.id, task, state: 'succeeded', startedAt, endedAt: Date.now(), exitCode: 0 };
    if (perTask(this.layout)) {
      await this.chains.run([this.ruKey(ru)], async () => {
        const rev = await this.txn(
          [{ key: this.ruKey(ru), target: 'mod', op: '==', value: this.ruRev.get(ru)! }],
          [
            { type: 'put', key: this.ruKey(ru), value: '{"state":"free"}' },
            {
              type: 'put',
              key: this.taskKey(j, task),
              value: JSON.stringify({ ...outcome, index: task, ru: { server: `s${Math.floor(ru / RUS_PER_SERVER)}`, index: ru % RUS_PER_SERVER }, attempt: 1 }),
            },
          ],
        );
        this.ruRev.set(ru, rev);
      });
      this.pushFree(ru);
      if (++j.done === j.tasks) await this.finish(j);
    } else {
      // The node writes its server's key at an end, or once per --end-batch-ms for all the ends
      // of that interval.
      const s = Math.floor(ru / RUS_PER_SERVER);
      const st = this.servers[s]!;
      st.ending.push({ j, ru, o: outcome });
      if (this.o.endBatchMs <= 0) await this.flushEnds(s);
      else st.endTimer ??= setTimeout(() => void this.flushEnds(s).catch(fail), this.o.endBatchMs);
    }
  }

  private async flushEnds(s: number): Promise<void> {
    const st = this.servers[s]!;
    st.endTimer = undefined;
    const batch = st.ending.splice(0);
    if (batch.length === 0) return;
    await this.chains.run([this.serverKey(s)], async () => {
      for (const b of batch) {
        st.slots[b.ru % RUS_PER_SERVER] = null;
        st.ended.push(b.o);
      }
      st.rev = await this.txn(
        [{ key: this.serverKey(s), target: 'mod', op: '==', value: st.rev }],
        [{ type: 'put', key: this.serverKey(s), value: JSON.stringify({ slots: st.slots, ended: st.ended }) }],
      );
    });
    for (const b of batch) {
      this.pushFree(b.ru);
      // The owner sees the outcome in the server's record and folds it into the job's, at most
      // once per --fold-ms a job; an outcome leaves the server's record with the server's next
      // write after it was folded.
      b.j.pendingFold.push({ o: b.o, s });
      if (!b.j.foldTimer) b.j.foldTimer = setTimeout(() => void this.fold(b.j).catch(fail), this.o.foldMs);
    }
  }

  private async fold(j: JobRun): Promise<void> {
    j.foldTimer = undefined;
    const folded = j.pendingFold.splice(0);
    j.done += folded.length;
    const final = j.done === j.tasks;
    await this.chains.run([this.jobKey(j)], async () => {
      const ops: Op[] = [
        {
          type: 'put',
          key: this.jobKey(j),
          value: JSON.stringify({ id: j.id, state: final ? 'succeeded' : 'running', tasks: j.tasks, done: j.done, outcomes: folded.map((f) => f.o) }),
        },
      ];
      if (final) ops.push({ type: 'delete', key: `${this.p}owners/${j.id}` });
      j.jobRev = await this.txn([], ops);
    });
    for (const f of folded) {
      const st = this.servers[f.s]!;
      const i = st.ended.indexOf(f.o);
      if (i >= 0) st.ended.splice(i, 1);
    }
  }

  private async finish(j: JobRun): Promise<void> {
    await this.chains.run([this.jobKey(j)], () =>
      this.txn(
        [],
        [
          { type: 'put', key: this.jobKey(j), value: JSON.stringify({ id: j.id, state: 'succeeded', tasks: j.tasks }) },
          { type: 'delete', key: `${this.p}owners/${j.id}` },
        ],
      ),
    );
  }

  busy(): number {
    return this.n * RUS_PER_SERVER - this.free.length;
  }
  pending(): number {
    return this.inFlight;
  }
}

function fail(e: unknown): void {
  process.stderr.write(`[record-layouts] ${e instanceof Error ? e.stack : String(e)}\n`);
  process.exit(1);
}

// ---------------------------------------------------------------- main

interface Row {
  layout: Layout;
  rate: number;
  placedPerSec: number;
  txnsPerTask: number;
  keysPerTask: number;
  eventsPerTask: number;
  kbDeliveredPerTask: number;
  cpuMsPerTask: { etcd: number; frontEnds: number; node: number; writer: number; total: number };
  busyRus: number;
  backlog: number;
  shed: number;
}

async function runOne(
  url: string,
  etcdPid: number,
  layout: Layout,
  rate: number,
  o: { servers: number; frontEnds: number; taskMs: number; windowS: number; chunk: number; foldMs: number; endBatchMs: number; seed: number },
  prefix: string,
): Promise<Row> {
  const store = await openStore(url);
  const cell = new Cell(store, prefix, layout, o.servers, {
    frontEnds: o.frontEnds,
    taskMs: o.taskMs,
    chunk: o.chunk,
    foldMs: o.foldMs,
    endBatchMs: o.endBatchMs,
    seed: o.seed,
  });
  await cell.seed();
  process.stderr.write(`[record-layouts]   seeded; starting the watchers\n`);
  const fePrefixes = (fe: number): string[] => {
    if (layout === 'per-task' || layout === 'per-task-no-start') return [`${prefix}rus/`, `${prefix}tasks/`, `${prefix}jobs/`, `${prefix}owners/`];
    if (layout === 'per-task-owner') return [`${prefix}rus/`, `${prefix}tasks/fe${fe}/`, `${prefix}jobs/fe${fe}/`, `${prefix}owners/`];
    return [`${prefix}cell/`, `${prefix}jobs/fe${fe}/`, `${prefix}owners/`];
  };
  const watchers = [
    ...Array.from({ length: o.frontEnds }, (_, fe) => new Watcher(url, fePrefixes(fe))),
    new Watcher(url, [perTask(layout) ? `${prefix}rus/` : `${prefix}cell/`]),
  ];
  for (const w of watchers) if ((await w.next()) !== 'ready') throw new Error('a watcher did not start');
  const jobRate = rate / MEAN_TASKS;
  const arrivals = new SeededRng(o.seed + 7);
  let stop = false;
  const gen = (async () => {
    let next = performance.now();
    while (!stop) {
      next += (-Math.log(1 - arrivals.next()) / jobRate) * 1000;
      const wait = next - performance.now();
      if (wait > 0) await new Promise((r) => setTimeout(r, wait));
      if (cell.pending() > 100) continue; // the generator's bound on jobs in flight: past it, arrivals are dropped (counted nowhere: the rate placed says it)
      void cell.submit().catch(fail);
    }
  })();
  await new Promise((r) => setTimeout(r, o.taskMs + 2000));
  const snap = async () => ({
    t: performance.now(),
    etcd: cpuSeconds(etcdPid),
    fe: watchers.slice(0, o.frontEnds).reduce((s, w) => s + w.cpu(), 0),
    node: watchers[o.frontEnds]!.cpu(),
    writer: process.cpuUsage().user / 1e6 + process.cpuUsage().system / 1e6,
    counts: { ...cell.counts },
    ev: await Promise.all(watchers.map((w) => w.count())),
  });
  const a = await snap();
  await new Promise((r) => setTimeout(r, o.windowS * 1000));
  const b = await snap();
  stop = true;
  cell.stopped = true;
  await gen;
  const placed = b.counts.placed - a.counts.placed;
  const events = b.ev.reduce((s, e) => s + e.events, 0) - a.ev.reduce((s, e) => s + e.events, 0);
  const bytes = b.ev.reduce((s, e) => s + e.bytes, 0) - a.ev.reduce((s, e) => s + e.bytes, 0);
  const per = (x: number): number => (x * 1000) / placed;
  const cpu = { etcd: per(b.etcd - a.etcd), frontEnds: per(b.fe - a.fe), node: per(b.node - a.node), writer: per(b.writer - a.writer), total: 0 };
  cpu.total = cpu.etcd + cpu.frontEnds + cpu.node + cpu.writer;
  const row: Row = {
    layout,
    rate,
    placedPerSec: placed / ((b.t - a.t) / 1000),
    txnsPerTask: (b.counts.txns - a.counts.txns) / placed,
    keysPerTask: (b.counts.keys - a.counts.keys) / placed,
    eventsPerTask: events / placed,
    kbDeliveredPerTask: bytes / 1024 / placed,
    cpuMsPerTask: cpu,
    busyRus: cell.busy(),
    backlog: cell.pending(),
    shed: b.counts.shed - a.counts.shed,
  };
  await Promise.all(watchers.map((w) => w.stop()));
  await store.close();
  return row;
}

async function main(): Promise<void> {
  const rates = flag('rates', '300,900').split(',').map(Number);
  const layouts = flag('layouts', LAYOUTS.join(',')).split(',') as Layout[];
  for (const l of layouts) if (!LAYOUTS.includes(l)) throw new Error(`--layouts: "${l}" is not one of ${LAYOUTS.join(', ')}`);
  const o = {
    servers: Number(flag('servers', '10000')),
    frontEnds: Number(flag('front-ends', '3')),
    taskMs: Number(flag('task-s', '5')) * 1000,
    windowS: Number(flag('window-s', '20')),
    chunk: Number(flag('chunk', '42')),
    foldMs: Number(flag('fold-ms', '100')),
    endBatchMs: Number(flag('end-batch-ms', '0')),
    seed: Number(flag('seed', '1')),
  };
  const name = flag('name', 'record-layouts');
  const say = (m: string): void => void process.stderr.write(`[record-layouts] ${m}\n`);
  const rows: Row[] = [];
  const load0 = loadavg()[0] ?? 0;
  // A fresh etcd for every run: each layout starts from an empty store, as a new cell would.
  for (const rate of rates)
    for (const layout of layouts) {
      const etcd = await startEtcd({ bin: ensureEtcd(say), extraArgs: ['--quota-backend-bytes', String(8 * 2 ** 30)] });
      try {
        const url = etcd.endpoint.replace(/^http:\/\//, 'etcd://');
        const etcdPid = Number(
          execFileSync('pgrep', ['-f', '--', `--data-dir ${etcd.dataDir}`])
            .toString()
            .trim()
            .split('\n')[0],
        );
        say(`${layout} at ${rate} tasks/s…`);
        const row = await runOne(url, etcdPid, layout, rate, o, '/bench/layouts/');
        say(
          `  ${fmt(row.placedPerSec, 0)} placed/s, ${fmt(row.keysPerTask, 2)} keys, ${fmt(row.eventsPerTask, 2)} deliveries, ${fmt(row.cpuMsPerTask.total, 3)} ms CPU a task`,
        );
        rows.push(row);
      } finally {
        await etcd.stop();
      }
    }
  const commit = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { encoding: 'utf8' }).trim();
  const cmd = `npx tsx bench/record-layouts.ts ${process.argv.slice(2).join(' ')}`.trim();
  const md = [
    '# What the record layout costs a task',
    '',
    `\`${cmd}\` on ${machine()}, ${new Date().toISOString().slice(0, 16)} UTC, commit ${commit}; load average before the run ${fmt(load0, 2)}, after ${fmt(loadavg()[0] ?? 0, 2)}.`,
    `${o.servers} servers of ${RUS_PER_SERVER} RUs, ${o.frontEnds} front-end watchers and one node-side watcher, the soak's mix of job sizes (${fmt(MEAN_TASKS, 1)} tasks a job), tasks of ${o.taskMs / 1000} s (0.5–1.5×), chunks of ${o.chunk} picks, outcomes folded at most every ${o.foldMs} ms a job; ${o.endBatchMs > 0 ? `in the per-server layouts a server's ends written together once per ${o.endBatchMs} ms` : 'each end written at once'}; a window of ${o.windowS} s after a warm-up of ${o.taskMs / 1000 + 2} s.`,
    '',
    mdTable(
      [
        'layout',
        'offered tasks/s',
        'placed/s',
        'txns / task',
        'keys / task',
        'deliveries / task',
        'KiB delivered / task',
        'CPU ms / task: etcd',
        'front-ends',
        'node side',
        'writer',
        'total',
        'RUs busy',
        'jobs in flight',
        'txns shed by overload',
      ],
      rows.map((r) => [
        r.layout,
        r.rate,
        fmt(r.placedPerSec, 0),
        fmt(r.txnsPerTask, 2),
        fmt(r.keysPerTask, 2),
        fmt(r.eventsPerTask, 2),
        fmt(r.kbDeliveredPerTask, 2),
        fmt(r.cpuMsPerTask.etcd, 3),
        fmt(r.cpuMsPerTask.frontEnds, 3),
        fmt(r.cpuMsPerTask.node, 3),
        fmt(r.cpuMsPerTask.writer, 3),
        fmt(r.cpuMsPerTask.total, 3),
        r.busyRus,
        r.backlog,
        r.shed,
      ]),
    ),
    '',
  ].join('\n');
  const out = writeResults(name, { command: cmd, commit, machine: machine(), options: o, rows }, md, join(RESULTS_DIR, 'record-layouts'));
  say(`wrote ${out.join(', ')}`);
  process.stdout.write(md);
}

if (process.argv[2] === '--watcher') void watcherMain(JSON.parse(process.argv[3] ?? '{}') as { url: string; prefixes: string[] }).catch(fail);
else void main().catch(fail);
