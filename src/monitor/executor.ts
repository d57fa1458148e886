/**
 * Executors of a node: the simulated one (a timer, slowed by the ground-truth interference model)
 * and the process one (argv pinned to the RU's core, logs per task, CPU-time rate).
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { closeSync, existsSync, mkdirSync, openSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { cpus } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { SUPERVISOR_CHECK_MS, SUPERVISOR_REPORT_POLL_MS, SUPERVISOR_REPORT_WAIT_MS, SUPERVISOR_TERM_MS } from '../state/node-fence.ts';
import type { DirectStoreAccess } from '../store/types.ts';
import type { Clock, Timer } from '../util/clock.ts';

/** What an executor needs to run one task attempt. */
export interface TaskLaunch {
  job: string;
  task: number;
  ruIndex: number;
  /** RU record revision of this attempt: names its log files. */
  revision: number;
  /** The node the task runs on, and the attempt (0 for the task's first placement). */
  server?: string;
  attempt?: number;
  /** Ideal duration (simulated executor). */
  durationMs?: number;
  command?: { argv: string[]; env?: Record<string, string> };
  /**
   * How the task's supervisor writes a success itself when the monitor cannot (process executor,
   * etcd store; see supervisor.js): the store, the RU record and the revision the attempt holds
   * it at (the fence), the task record to write with the end time filled in, and the free RU.
   */
  report?: SuccessReport;
  /**
   * The attempt as the monitor knows it, kept beside the task's logs (`<base>.attempt`) until its
   * outcome is in the store: a monitor started again after the task was placed elsewhere reports
   * a success it finds there (leftSuccesses).
   */
  held?: HeldOnDisk;
}

/** What `<base>.attempt` holds (outcomes.ts HeldAttempt and the start time). */
export interface HeldOnDisk {
  job: string;
  task: number;
  commitId: string;
  ruIndex: number;
  rec: Record<string, unknown>;
  placedRevision: number;
  startedAt: number;
}

export interface SuccessReport {
  store: DirectStoreAccess;
  ruKey: string;
  rev: number;
  taskKey: string;
  /** The task record of the success, `endedAt` filled in when written. */
  record: Record<string, unknown>;
  freeValue: string;
}

export interface TaskExit {
  /** lost: its supervisor stopped it at the node's deadline (the monitor had not been heard from). */
  state: 'succeeded' | 'failed' | 'lost';
  exitCode?: number;
  message?: string;
}

export interface TaskHandle {
  readonly pid?: number;
  readonly logPath?: string;
  /** Achieved rate relative to the expected one (1 = as expected); 1 when unknown. */
  rate(): number;
  /** Interference slowdown of the task's server changed (simulated executor). */
  setSlowdown(s: number): void;
  /** Stops the task; resolves when it has stopped. onExit is not called after kill(). */
  kill(): Promise<void>;
  /** The RU record holds the attempt at a new revision (adopted under a new lease): the supervisor's fence. */
  setRevision?(rev: number): void;
}

export interface Executor {
  readonly kind: 'simulated' | 'process';
  /** Tasks' rates are measured (or modelled): the monitor may learn from them (state/profiles.ts). */
  readonly measuresRate?: boolean;
  /** Where the executor writes task logs, if it does (the monitor's default journal lives there). */
  readonly logDir?: string;
  start(t: TaskLaunch, onExit: (e: TaskExit) => void): TaskHandle;
  /** What a previous life of this node's monitor left of an attempt (process executor). */
  previousRun?(t: Pick<TaskLaunch, 'job' | 'task' | 'revision'>): PreviousRun;
  /** Stops an attempt a previous life left running; its exit record if it ended by itself first. */
  stopOrphan?(t: Pick<TaskLaunch, 'job' | 'task' | 'revision'>, pid: number): Promise<TaskExit | undefined>;
  /**
   * The node's deadline (see state/node-fence.ts), as milliseconds from now: the tasks' supervisors
   * stop them once it has passed unless it is moved on (process executor).
   */
  setDeadline?(server: string, inMs: number, lease?: string): void;
  /**
   * Attempts whose task exited 0 and whose outcome the store may not have (their `<base>.attempt`
   * is still there), with the time the exit was recorded (process executor).
   */
  leftSuccesses?(): Array<{ held: HeldOnDisk; logPath: string; endedAt: number }>;
  /** The store has the outcome of the attempt logging at `logPath`: forget it. */
  attemptReported?(logPath: string): void;
}

/**
 * Runs for the task's duration stretched by the interference slowdown of its server, as the
 * shared performance model computes it (src/model/perf.ts). Work is tracked as progress, so a
 * neighbour arriving halfway slows only the second half.
 */
export class SimulatedExecutor implements Executor {
  readonly kind = 'simulated' as const;
  readonly measuresRate = true;
  constructor(
    private readonly clock: Clock,
    private readonly defaultDurationMs = 1000,
  ) {}

  start(t: TaskLaunch, onExit: (e: TaskExit) => void): TaskHandle {
    return new SimulatedRun(this.clock, t.durationMs ?? this.defaultDurationMs, onExit);
  }
}

/**
 * One simulated task: a timer for its remaining work at its current slowdown. A class rather than
 * an object of closures: a hollow process holds one per running task (100,000 and more), and
 * closures cost a context each, plus an own `name` property where the sources run through tsx.
 */
class SimulatedRun implements TaskHandle {
  private slowdown = 1;
  private since: number;
  private timer: Timer | undefined;
  private done = false;

  constructor(
    private readonly clock: Clock,
    private remaining: number,
    private readonly onExit: (e: TaskExit) => void,
  ) {
    this.since = clock.now();
    this.arm();
  }

  rate(): number {
    return 1 / this.slowdown;
  }

  setSlowdown(s: number): void {
    if (this.done || s === this.slowdown) return;
    const now = this.clock.now();
    this.remaining = Math.max(0, this.remaining - (now - this.since) / this.slowdown);
    this.since = now;
    this.slowdown = s;
    this.arm();
  }

  kill(): Promise<void> {
    this.done = true;
    this.timer?.cancel();
    return Promise.resolve();
  }

  private arm(): void {
    this.timer?.cancel();
    this.timer = this.clock.setTimer(this.remaining * this.slowdown, () => {
      this.done = true;
      this.onExit({ state: 'succeeded', exitCode: 0 });
    });
  }
}

export interface ProcessExecutorOptions {
  clock: Clock;
  /** Per-task stdout/stderr go to <logDir>/<job>/<task>-<revision>.{stdout,stderr}. */
  logDir: string;
  /** Pin each task to its RU's core with taskset (when the binary exists). Default true. */
  pin?: boolean;
  /** Between SIGTERM and SIGKILL. */
  killGraceMs?: number;
  /** Environment every task starts from (default: PATH, HOME, LANG of this process). */
  baseEnv?: Record<string, string>;
  /**
   * Measure each task's rate from its CPU time (Linux /proc; elsewhere the rate stays 1): the CPU
   * time its process group used over the last window of `cpuSampleMs`, divided by the wall time
   * of that window. A task expects its RU — one core — to itself, so a CPU-bound task that gets
   * its core runs at about 1, and one squeezed by neighbours (or by an oversubscribed machine)
   * falls below. Off by default: a task that waits on I/O or sleeps would look slow too, so turn
   * it on for nodes that run CPU-bound work.
   */
  cpuRate?: boolean;
  cpuSampleMs?: number;
}

/**
 * The shell that runs a task's argv (under its supervisor, supervisor.js) and, when it exits by itself, writes its exit code to
 * `<base>.exit` (through a rename, so the file is whole or absent). The record survives the
 * monitor: a monitor killed just as a task ended finds the outcome there when it starts again,
 * instead of calling the task lost and running it a second time. A kill of the process group
 * stops the shell too, and leaves no record (the task did not end by itself).
 */
const EXIT_WRAPPER = [
  // stdin is a pipe from the supervisor: a watchdog reads it and kills the whole group at its end
  // of file (the supervisor died), so a task never runs without its supervisor.
  'exec 3<&0 </dev/null',
  '"$@" 3<&- & c=$!',
  '( read -r _ <&3; kill -9 -$$ ) 2>/dev/null & w=$!',
  'exec 3<&-',
  'wait "$c"; c=$?',
  'kill "$w" 2>/dev/null',
  'printf %s "$c" > "$0.exit.tmp" && mv -f "$0.exit.tmp" "$0.exit"; exit "$c"',
].join('\n');

/** A supervisor's exit code when it stopped its task at the node's deadline (EX_TEMPFAIL). */
export const FENCED_EXIT = 75;

/** The supervisor's script (plain JavaScript beside this module; in the package, also under src/). */
export function supervisorScript(): string {
  const here = dirname(fileURLToPath(import.meta.url));
  const sibling = join(here, 'supervisor.js');
  if (existsSync(sibling)) return sibling;
  // dist/src/monitor/executor.js: the script ships as src/monitor/supervisor.js.
  return join(here, '..', '..', '..', 'src', 'monitor', 'supervisor.js');
}

/** CLOCK_MONOTONIC in ms, the clock shared with the supervisors (one per machine). */
function monotonicMs(): number {
  return Number(process.hrtime.bigint() / 1_000_000n);
}

/** Used when a task starts before the monitor has written any deadline (never, once registered). */
const NO_DEADLINE_YET_MS = 24 * 3600 * 1000;

/** What a monitor's previous life left of one task attempt (ProcessExecutor.previousRun). */
export type PreviousRun =
  | { kind: 'exited'; exit: TaskExit }
  /** Still running, in a process group the monitor no longer supervises. */
  | { kind: 'running'; pid: number }
  | { kind: 'unknown' };

/**
 * Spawns the task's argv in its own process group (so a kill reaches its children), pinned to
 * the RU's core with `taskset -c` where available, with stdout and stderr in per-task log files.
 * The group leader is a shell that records the exit code (EXIT_WRAPPER), and the group's id is
 * written to `<base>.pid`, so that a monitor that restarts can tell what became of the attempts
 * it was running (previousRun) and stop one still running (stopOrphan) before it is placed again.
 */
export class ProcessExecutor implements Executor {
  readonly kind = 'process' as const;
  get measuresRate(): boolean {
    return this.o.cpuRate === true && this.cpu.available;
  }
  private readonly taskset: boolean;
  private readonly ncpu = Math.max(1, cpus().length);
  private readonly children = new Set<ChildProcess>();

  constructor(private readonly o: ProcessExecutorOptions) {
    this.taskset = o.pin !== false && hasTaskset();
  }

  get pinning(): boolean {
    return this.taskset;
  }

  get logDir(): string {
    return this.o.logDir;
  }

  /** server → the node's deadline, CLOCK_MONOTONIC ms, as last written. */
  private readonly deadlines = new Map<string, number>();

  /** Where the supervisors of `server`'s tasks read the node's deadline. */
  deadlineFile(server: string | undefined): string {
    return join(this.o.logDir, `.deadline-${(server ?? 'node').replace(/[^A-Za-z0-9._-]/g, '_')}`);
  }

  /** Where the supervisors of `server`'s tasks read the lease the node's free RUs are bound to. */
  leaseFile(server: string | undefined): string {
    return join(this.o.logDir, `.lease-${(server ?? 'node').replace(/[^A-Za-z0-9._-]/g, '_')}`);
  }

  private readonly leases = new Map<string, string>();

  setDeadline(server: string, inMs: number, lease?: string): void {
    if (lease !== undefined && this.leases.get(server) !== lease) {
      try {
        mkdirSync(this.o.logDir, { recursive: true });
        writeAtomically(this.leaseFile(server), lease);
        this.leases.set(server, lease);
      } catch {
        // tried again at the next write
      }
    }
    const at = monotonicMs() + Math.max(0, Math.floor(inMs));
    if (this.deadlines.get(server) === at) return;
    this.deadlines.set(server, at);
    const file = this.deadlineFile(server);
    try {
      mkdirSync(this.o.logDir, { recursive: true });
      writeFileSync(`${file}.tmp`, String(at));
      renameSync(`${file}.tmp`, file);
    } catch {
      // the log dir went away: the supervisors keep the deadline they last read
    }
  }

  start(t: TaskLaunch, onExit: (e: TaskExit) => void): TaskHandle {
    const argv = t.command?.argv ?? [];
    const dir = join(this.o.logDir, t.job);
    mkdirSync(dir, { recursive: true });
    const base = join(dir, `${t.task}-${t.revision}`);
    if (t.held) writeAtomically(`${base}.attempt`, JSON.stringify(t.held));
    const out = openSync(`${base}.stdout`, 'a');
    const err = openSync(`${base}.stderr`, 'a');
    const env = {
      ...(this.o.baseEnv ?? pickEnv(['PATH', 'HOME', 'LANG'])),
      ...t.command?.env,
      TARCIL_JOB: t.job,
      TARCIL_TASK: String(t.task),
      TARCIL_RU: String(t.ruIndex),
      TARCIL_REVISION: String(t.revision),
      ...(t.server !== undefined ? { TARCIL_SERVER: t.server } : {}),
      ...(t.attempt !== undefined ? { TARCIL_ATTEMPT: String(t.attempt) } : {}),
    };
    const inner = this.taskset ? ['taskset', '-c', String(t.ruIndex % this.ncpu), ...argv] : argv;
    const grace = this.o.killGraceMs ?? 2000;
    const server = t.server ?? 'node';
    const supervised = {
      // No argv: the shell's "not found", as for a program that does not exist.
      argv: argv.length > 0 ? ['/bin/sh', '-c', EXIT_WRAPPER, base, ...inner] : ['/bin/sh', '-c', 'exit 127'],
      env,
      base,
      deadlineFile: this.deadlineFile(server),
      deadline: this.deadlines.get(server) ?? monotonicMs() + NO_DEADLINE_YET_MS,
      checkMs: SUPERVISOR_CHECK_MS,
      termMs: SUPERVISOR_TERM_MS,
      killGraceMs: grace,
      fencedExit: FENCED_EXIT,
      ...(t.report
        ? {
            report: {
              endpoints: t.report.store.endpoints,
              ...(t.report.store.tls ? { tls: t.report.store.tls } : {}),
              ...(t.report.store.auth ? { auth: true } : {}),
              ruKey: t.report.ruKey,
              rev: t.report.rev,
              revFile: `${base}.rev`,
              taskKey: t.report.taskKey,
              record: { ...t.report.record, logPath: base },
              freeValue: t.report.freeValue,
              leaseFile: this.leaseFile(server),
              waitMs: SUPERVISOR_REPORT_WAIT_MS,
              pollMs: SUPERVISOR_REPORT_POLL_MS,
            },
          }
        : {}),
    };
    // The store's password reaches the supervisor in its environment, not on its command line.
    const supEnv = pickEnv(['PATH', 'HOME', 'LANG']);
    if (t.report?.store.auth) {
      supEnv.TARCIL_SUPERVISOR_ETCD_USER = t.report.store.auth.user;
      supEnv.TARCIL_SUPERVISOR_ETCD_PASSWORD = t.report.store.auth.password;
    }
    let killed = false;
    let exited = false;
    let child: ChildProcess;
    const exitWaiters: Array<() => void> = [];
    try {
      child = spawn(process.execPath, [supervisorScript(), JSON.stringify(supervised)], {
        // fd 3: the supervisor says there at once that the task succeeded (it may then stay a
        // moment to see the success reach the store).
        stdio: t.report ? ['ignore', out, err, 'pipe'] : ['ignore', out, err],
        env: supEnv,
        detached: true,
      });
    } finally {
      closeSync(out);
      closeSync(err);
    }
    this.children.add(child);
    const finish = (e: TaskExit): void => {
      if (exited) return;
      exited = true;
      this.children.delete(child);
      for (const w of exitWaiters) w();
      if (!killed) onExit(e);
    };
    const said = child.stdio[3];
    if (said) {
      let text = '';
      said.on('error', () => undefined);
      said.on('data', (d: Buffer) => {
        text += d.toString('utf8');
        if (text.includes('succeeded\n')) finish({ state: 'succeeded', exitCode: 0 });
      });
    }
    child.once('error', (e) => finish({ state: 'failed', message: `cannot start ${argv[0] ?? ''}: ${e.message}` }));
    child.once('exit', (code, signal) => {
      if (code === 0) finish({ state: 'succeeded', exitCode: 0 });
      else if (code === FENCED_EXIT && existsSync(`${base}.exit`) === false) {
        finish({ state: 'lost', message: "stopped by its supervisor: no word from the node's monitor for the lease TTL and the disconnect grace" });
      } else if (code === 127 || code === 126) {
        // The shell's codes for a program it could not find or could not execute.
        finish({ state: 'failed', exitCode: code, message: `cannot start ${argv[0] ?? ''}: ${code === 127 ? 'not found' : 'not executable'} (exit code ${code})` });
      } else finish({ state: 'failed', ...(code !== null ? { exitCode: code } : {}), message: signal ? `killed by ${signal}` : `exit code ${code ?? '?'}` });
    });
    // The supervisor is its own group's leader; the task runs in a group of its own, whose id the
    // supervisor writes to <base>.pid as soon as it has started it.
    const supPid = child.pid;
    let taskGroup: number | undefined;
    const group = (): number | undefined => (taskGroup ??= readPid(base));
    const rate = this.o.cpuRate && supPid !== undefined && this.cpu.available ? this.cpuRateOf(group) : () => 1;
    const gone = (): boolean => exited && !this.cpu.groupAlive(group() ?? -1);
    return {
      ...(supPid !== undefined ? { pid: supPid } : {}),
      logPath: base,
      rate,
      setSlowdown: () => undefined,
      setRevision: (rev) => {
        if (!t.report || exited) return;
        try {
          writeAtomically(`${base}.rev`, String(rev));
        } catch {
          // the log dir went away: the supervisor's write then fails its fence, the monitor reports
        }
      },
      kill: () => {
        killed = true;
        if (supPid === undefined) return Promise.resolve();
        // Stopped means every process of the task's group is gone, not only the supervisor: a
        // copy started elsewhere must not overlap it. The supervisor sends SIGTERM, then SIGKILL
        // after the grace; SIGKILL to both if that takes too long.
        if (gone()) return Promise.resolve();
        const clock = this.o.clock;
        return new Promise<void>((resolve) => {
          const start = clock.monotonic();
          let hard = false;
          signalPid(supPid, 'SIGTERM');
          const check = (): void => {
            if (gone()) return resolve();
            const waited = clock.monotonic() - start;
            if (!hard && waited >= grace + 500) {
              const g = group();
              if (g !== undefined) signalGroup(g, 'SIGKILL');
              signalPid(supPid, 'SIGKILL');
              hard = true;
            }
            // SIGKILL cannot be refused; past a second grace only an unreaped zombie can remain.
            if (hard && waited >= 2 * grace + 1000) return resolve();
            clock.setTimer(exited ? 10 : 50, check);
          };
          exitWaiters.push(check);
          clock.setTimer(10, check);
        });
      },
    };
  }

  private readonly cpu = new GroupCpu();

  leftSuccesses(): Array<{ held: HeldOnDisk; logPath: string; endedAt: number }> {
    const out: Array<{ held: HeldOnDisk; logPath: string; endedAt: number }> = [];
    let jobs: string[];
    try {
      jobs = readdirSync(this.o.logDir);
    } catch {
      return out;
    }
    for (const job of jobs) {
      if (job.startsWith('.') || job === 'journal') continue;
      let files: string[];
      try {
        files = readdirSync(join(this.o.logDir, job)).filter((f) => f.endsWith('.attempt'));
      } catch {
        continue;
      }
      for (const f of files) {
        const base = join(this.o.logDir, job, f.slice(0, -'.attempt'.length));
        try {
          if (readFileSync(`${base}.exit`, 'utf8').trim() !== '0') continue;
          const held = JSON.parse(readFileSync(`${base}.attempt`, 'utf8')) as HeldOnDisk;
          out.push({ held, logPath: base, endedAt: Math.round(statSync(`${base}.exit`).mtimeMs) });
        } catch {
          // no exit record (still running, or stopped), or unreadable: nothing to report
        }
      }
    }
    return out;
  }

  attemptReported(logPath: string): void {
    rmSync(`${logPath}.attempt`, { force: true });
  }

  /** rate() of one task: 1 until a full window has been seen, then CPU ms per wall ms of the last window. */
  private cpuRateOf(pgid: () => number | undefined): () => number {
    const window = this.o.cpuSampleMs ?? 1000;
    const msOf = (): number => {
      const g = pgid();
      return g === undefined ? 0 : this.cpu.ms(g);
    };
    let prev = { cpuMs: msOf(), at: this.o.clock.monotonic() };
    let last = 1;
    return () => {
      const at = this.o.clock.monotonic();
      if (at - prev.at < window) return last;
      const cpuMs = msOf();
      last = Math.max(0, cpuMs - prev.cpuMs) / (at - prev.at);
      prev = { cpuMs, at };
      return last;
    };
  }

  /**
   * What became of an attempt that a previous life of this monitor started (same log dir): it
   * exited by itself (its exit record), it is still running (its process group is alive and is
   * that attempt: same job, task and revision in its environment), or nothing is known.
   */
  previousRun(t: Pick<TaskLaunch, 'job' | 'task' | 'revision'>): PreviousRun {
    const base = join(this.o.logDir, t.job, `${t.task}-${t.revision}`);
    const exit = readExitRecord(base);
    if (exit) return { kind: 'exited', exit };
    let pid: number;
    try {
      pid = Number(readFileSync(`${base}.pid`, 'utf8').trim());
    } catch {
      return { kind: 'unknown' };
    }
    if (!Number.isInteger(pid) || pid <= 0 || !isAttempt(pid, t)) return { kind: 'unknown' };
    return { kind: 'running', pid };
  }

  /**
   * Stops an attempt left running by a previous life (SIGKILL to its process group) and waits
   * until it is gone; then reads its exit record once more, in case it ended by itself first.
   */
  async stopOrphan(t: Pick<TaskLaunch, 'job' | 'task' | 'revision'>, pid: number): Promise<TaskExit | undefined> {
    signalGroup(pid, 'SIGKILL');
    for (let i = 0; i < 200 && isAttempt(pid, t); i++) await this.o.clock.sleep(10);
    return readExitRecord(join(this.o.logDir, t.job, `${t.task}-${t.revision}`));
  }

  /** Kills every supervisor still running, and so its task (shutdown). */
  killAll(): void {
    for (const c of this.children) if (c.pid !== undefined) signalGroup(c.pid, 'SIGKILL');
  }
}

function readExitRecord(base: string): TaskExit | undefined {
  let text: string;
  try {
    text = readFileSync(`${base}.exit`, 'utf8').trim();
  } catch {
    return undefined;
  }
  const code = Number(text);
  if (text === '' || !Number.isInteger(code)) return undefined;
  return code === 0 ? { state: 'succeeded', exitCode: 0 } : { state: 'failed', exitCode: code, message: `exit code ${code}` };
}

/** Is pid a live (not zombie) process of this attempt (its environment names the job, task and revision)? */
function isAttempt(pid: number, t: Pick<TaskLaunch, 'job' | 'task' | 'revision'>): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    if (stat.slice(stat.lastIndexOf(')') + 2).startsWith('Z')) return false;
    const env = readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0');
    return env.includes(`TARCIL_JOB=${t.job}`) && env.includes(`TARCIL_TASK=${t.task}`) && env.includes(`TARCIL_REVISION=${t.revision}`);
  } catch {
    return false;
  }
}

function readPid(base: string): number | undefined {
  try {
    const pid = Number(readFileSync(`${base}.pid`, 'utf8').trim());
    return Number.isInteger(pid) && pid > 0 ? pid : undefined;
  } catch {
    return undefined;
  }
}

function writeAtomically(file: string, text: string): void {
  writeFileSync(`${file}.tmp`, text);
  renameSync(`${file}.tmp`, file);
}

function signalPid(pid: number, sig: NodeJS.Signals): void {
  try {
    process.kill(pid, sig);
  } catch {
    // already gone
  }
}

function signalGroup(pid: number, sig: NodeJS.Signals): void {
  try {
    process.kill(-pid, sig);
  } catch {
    try {
      process.kill(pid, sig);
    } catch {
      // already gone
    }
  }
}

let tasksetFound: boolean | undefined;
export function hasTaskset(): boolean {
  if (tasksetFound === undefined) {
    const r = spawnSync('taskset', ['-c', '0', 'true'], { stdio: 'ignore' });
    tasksetFound = r.status === 0;
  }
  return tasksetFound;
}

function pickEnv(names: string[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (const n of names) {
    const v = process.env[n];
    if (v !== undefined) out[n] = v;
  }
  return out;
}

/**
 * CPU time of process groups from /proc/<pid>/stat: utime + stime of every live member, plus
 * cutime + cstime (children it has reaped), so a shell running commands one after another is
 * counted whole. One scan of /proc serves every task for a short while.
 */
class GroupCpu {
  readonly available = process.platform === 'linux' && existsSync('/proc/self/stat');
  private readonly msPerTick = 1000 / clockTicks();
  private cache: { at: number; ticks: Map<number, number> } | undefined;

  /** Some process of the group still runs (zombies, dead but not yet reaped, do not count). */
  groupAlive(pgid: number): boolean {
    if (!this.available) return false;
    for (const f of procStats()) if (Number(f[2]) === pgid && f[0] !== 'Z' && f[0] !== 'X') return true;
    return false;
  }

  ms(pgid: number): number {
    const now = Date.now();
    if (!this.cache || now - this.cache.at > 100) this.cache = { at: now, ticks: this.scan() };
    return (this.cache.ticks.get(pgid) ?? 0) * this.msPerTick;
  }

  private scan(): Map<number, number> {
    const ticks = new Map<number, number>();
    for (const f of procStats()) {
      const pgrp = Number(f[2]);
      const t = Number(f[11]) + Number(f[12]) + Number(f[13]) + Number(f[14]);
      if (Number.isFinite(pgrp) && Number.isFinite(t)) ticks.set(pgrp, (ticks.get(pgrp) ?? 0) + t);
    }
    return ticks;
  }
}

/** The fields of every process's /proc/<pid>/stat after "(comm)" (state first), skipping those gone meanwhile. */
function* procStats(): Generator<string[]> {
  let entries: string[] = [];
  try {
    entries = readdirSync('/proc');
  } catch {
    return;
  }
  for (const e of entries) {
    if (!/^\d+$/.test(e)) continue;
    let stat: string;
    try {
      stat = readFileSync(`/proc/${e}/stat`, 'utf8');
    } catch {
      continue; // exited meanwhile
    }
    // Fields after "(comm)", which may itself contain spaces and parentheses.
    yield stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  }
}

function clockTicks(): number {
  const r = spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' });
  const n = Number(r.stdout?.trim());
  return r.status === 0 && Number.isInteger(n) && n > 0 ? n : 100;
}
