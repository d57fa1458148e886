/**
 * The process executor: runs a task's argv under its supervisor (supervisor.js), pinned to the
 * RU's core, logs per task, CPU-time rate, and what a monitor's previous life left behind.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, existsSync, mkdirSync, openSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { cpus } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { SUPERVISOR_CHECK_MS, SUPERVISOR_REPORT_POLL_MS, SUPERVISOR_REPORT_WAIT_MS, SUPERVISOR_TERM_MS } from '../state/node-fence.ts';
import type { Clock } from '../util/clock.ts';
import type { Executor, HeldOnDisk, LeftRunning, PreviousRun, TaskExit, TaskHandle, TaskLaunch } from './executor-types.ts';
import {
  exited,
  GroupCpu,
  hasTaskset,
  isAttempt,
  monotonicMs,
  pickEnv,
  readExitRecord,
  readPid,
  signalGroup,
  signalPid,
  writeAtomically,
} from './process-util.ts';

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
  // dist/src/monitor/process-executor.js: the script ships as src/monitor/supervisor.js.
  return join(here, '..', '..', '..', 'src', 'monitor', 'supervisor.js');
}

/** Used when a task starts before the monitor has written any deadline (never, once registered). */
const NO_DEADLINE_YET_MS = 24 * 3600 * 1000;

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
        finish({
          state: 'failed',
          exitCode: code,
          message: `cannot start ${argv[0] ?? ''}: ${code === 127 ? 'not found' : 'not executable'} (exit code ${code})`,
        });
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
    for (const { base } of this.filesOfAttempts('.attempt')) {
      try {
        if (readFileSync(`${base}.exit`, 'utf8').trim() !== '0') continue;
        const held = JSON.parse(readFileSync(`${base}.attempt`, 'utf8')) as HeldOnDisk;
        out.push({ held, logPath: base, endedAt: Math.round(statSync(`${base}.exit`).mtimeMs) });
      } catch {
        // no exit record (still running, or stopped), or unreadable: nothing to report
      }
    }
    return out;
  }

  /**
   * The files of every attempt under the log dir that end in `suffix`: each attempt's job and
   * the path of its files without the suffix (`<logDir>/<job>/<task>-<revision>`).
   */
  private *filesOfAttempts(suffix: string): Generator<{ job: string; name: string; base: string }> {
    let jobs: string[];
    try {
      jobs = readdirSync(this.o.logDir);
    } catch {
      return;
    }
    for (const job of jobs) {
      if (job.startsWith('.') || job === 'journal') continue;
      let files: string[];
      try {
        files = readdirSync(join(this.o.logDir, job)).filter((f) => f.endsWith(suffix));
      } catch {
        continue;
      }
      for (const f of files) {
        const name = f.slice(0, -suffix.length);
        yield { job, name, base: join(this.o.logDir, job, name) };
      }
    }
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
   * Every attempt of `server` whose process group still runs, from the `<base>.pid` files beside
   * the logs: a monitor that has just started runs nothing yet, so each of them is a previous
   * life's, supervised by a supervisor that the new life's deadline would keep going. A group whose
   * environment does not name the attempt and the server (its id reused, another node's task in a
   * shared log dir) is not one.
   */
  leftRunning(server: string): LeftRunning[] {
    const out: LeftRunning[] = [];
    for (const { job, name, base } of this.filesOfAttempts('.pid')) {
      const m = /^(\d+)-(\d+)$/.exec(name);
      if (!m) continue;
      const a = { job, task: Number(m[1]), revision: Number(m[2]) };
      const pid = readPid(base);
      if (pid !== undefined && isAttempt(pid, a, server)) out.push({ ...a, pid });
    }
    return out;
  }

  /**
   * Stops an attempt left running by a previous life (SIGKILL to its process group) and waits
   * until it is gone; then reads its exit record once more, in case it ended by itself first.
   */
  async stopOrphan(t: Pick<TaskLaunch, 'job' | 'task' | 'revision'>, pid: number): Promise<TaskExit | undefined> {
    signalGroup(pid, 'SIGKILL');
    // Until it has exited, not only stopped looking like the attempt (exited()).
    for (let i = 0; i < 200 && (isAttempt(pid, t) || !exited(pid)); i++) await this.o.clock.sleep(10);
    return readExitRecord(join(this.o.logDir, t.job, `${t.task}-${t.revision}`));
  }

  /** Kills every supervisor still running, and so its task (shutdown). */
  killAll(): void {
    for (const c of this.children) if (c.pid !== undefined) signalGroup(c.pid, 'SIGKILL');
  }
}
