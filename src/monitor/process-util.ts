/**
 * Helpers of the process executor: exit and pid records, signals, taskset, the environment, and
 * CPU time of process groups from /proc.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import type { TaskExit, TaskLaunch } from './executor-types.ts';

/** CLOCK_MONOTONIC in ms, the clock shared with the supervisors (one per machine). */
export function monotonicMs(): number {
  return Number(process.hrtime.bigint() / 1_000_000n);
}

export function readExitRecord(base: string): TaskExit | undefined {
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

/**
 * Is pid a live (not zombie) process of this attempt (its environment names the job, task and
 * revision, and the server when one is given)?
 */
export function isAttempt(pid: number, t: Pick<TaskLaunch, 'job' | 'task' | 'revision'>, server?: string): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    if (stat.slice(stat.lastIndexOf(')') + 2).startsWith('Z')) return false;
    const env = readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0');
    if (server !== undefined && !env.includes(`TARCIL_SERVER=${server}`)) return false;
    return env.includes(`TARCIL_JOB=${t.job}`) && env.includes(`TARCIL_TASK=${t.task}`) && env.includes(`TARCIL_REVISION=${t.revision}`);
  } catch {
    return false;
  }
}

/**
 * Process `pid` has exited: gone, or a zombie. (A process on its way out stops showing its
 * environment before its state turns to zombie, so isAttempt alone says false too soon.)
 */
export function exited(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const state = stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
    return state === 'Z' || state === 'X';
  } catch {
    return true;
  }
}

export function readPid(base: string): number | undefined {
  try {
    const pid = Number(readFileSync(`${base}.pid`, 'utf8').trim());
    return Number.isInteger(pid) && pid > 0 ? pid : undefined;
  } catch {
    return undefined;
  }
}

export function writeAtomically(file: string, text: string): void {
  writeFileSync(`${file}.tmp`, text);
  renameSync(`${file}.tmp`, file);
}

export function signalPid(pid: number, sig: NodeJS.Signals): void {
  try {
    process.kill(pid, sig);
  } catch {
    // already gone
  }
}

export function signalGroup(pid: number, sig: NodeJS.Signals): void {
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

export function pickEnv(names: string[]): Record<string, string> {
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
export class GroupCpu {
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
