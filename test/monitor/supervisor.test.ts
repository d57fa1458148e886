/**
 * The tasks' supervisors (src/monitor/supervisor.js under the process executor): a task whose
 * node's deadline is not moved on is stopped at the deadline by its supervisor alone, whatever
 * its monitor does; one whose deadline moves on runs to its end and keeps its exit record; a
 * supervisor that is SIGKILLed takes its task with it. Real processes, real time (a few seconds).
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { ProcessExecutor, supervisorScript, type TaskExit, type TaskLaunch } from '../../src/monitor/executor.ts';
import { SUPERVISOR_CHECK_MS, SUPERVISOR_TERM_MS } from '../../src/state/node-fence.ts';
import { SystemClock } from '../../src/util/clock.ts';

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function executor(): ProcessExecutor {
  const dir = mkdtempSync(join(tmpdir(), 'tarcil-sup-'));
  dirs.push(dir);
  return new ProcessExecutor({ clock: new SystemClock(), logDir: dir, pin: false, killGraceMs: 500 });
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Alive and not a zombie. */
const alive = (pid: number): boolean => {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return !stat.slice(stat.lastIndexOf(')') + 2).startsWith('Z');
  } catch {
    return false;
  }
};

const until = async (ok: () => boolean, ms = 8000): Promise<void> => {
  const end = Date.now() + ms;
  while (!ok()) {
    if (Date.now() > end) throw new Error('timed out');
    await sleep(20);
  }
};

/** The task writes its own pid (the process that does the work) to `<dir>/<task>.pid`, then sleeps. */
function sleeper(ex: ProcessExecutor, task: number, seconds: number): { t: TaskLaunch; pidFile: string } {
  const pidFile = join(ex.logDir, `task-${task}.pid`);
  const t: TaskLaunch = {
    job: 'j1',
    task,
    ruIndex: 0,
    revision: 70 + task,
    server: 'n1',
    command: { argv: ['sh', '-c', `echo $$ > ${pidFile}; exec sleep ${seconds}`] },
  };
  return { t, pidFile };
}

const readTaskPid = (file: string): number => Number(readFileSync(file, 'utf8').trim());

describe('task supervisors', () => {
  it('stop a task once the node deadline has passed, without the monitor', async () => {
    const ex = executor();
    ex.setDeadline('n1', 1200);
    const { t, pidFile } = sleeper(ex, 1, 30);
    const exits: TaskExit[] = [];
    const start = Date.now();
    ex.start(t, (e) => exits.push(e));
    await until(() => {
      try {
        return alive(readTaskPid(pidFile));
      } catch {
        return false;
      }
    });
    const pid = readTaskPid(pidFile);
    // Nothing moves the deadline on (a frozen monitor): the supervisor stops the task by itself.
    await until(() => !alive(pid));
    const stoppedAfter = Date.now() - start;
    expect(stoppedAfter).toBeGreaterThanOrEqual(1200 - 50);
    await until(() => exits.length === 1);
    expect(exits[0]).toMatchObject({ state: 'lost' });
    expect(exits[0]?.message).toContain('supervisor');
    // It did not end by itself: no exit record, so a restarted monitor records it lost.
    expect(ex.previousRun(t)).toEqual({ kind: 'unknown' });
    // Within the check interval and the SIGTERM-to-SIGKILL window of the deadline.
    expect(stoppedAfter).toBeLessThan(1200 + SUPERVISOR_CHECK_MS + SUPERVISOR_TERM_MS + 1500);
  }, 20_000);

  it('let a task run to its end while the deadline moves on, and keep its exit record', async () => {
    const ex = executor();
    ex.setDeadline('n1', 800);
    const renew = setInterval(() => ex.setDeadline('n1', 800), 200);
    try {
      const exit = await new Promise<TaskExit>((resolve) => ex.start(sleeper(ex, 2, 2).t, resolve));
      expect(exit).toEqual({ state: 'succeeded', exitCode: 0 });
      expect(ex.previousRun(sleeper(ex, 2, 2).t)).toEqual({ kind: 'exited', exit: { state: 'succeeded', exitCode: 0 } });
    } finally {
      clearInterval(renew);
    }
  }, 20_000);

  it('take their task with them when they are killed', async () => {
    const ex = executor();
    ex.setDeadline('n1', 60_000);
    const { t, pidFile } = sleeper(ex, 3, 30);
    const h = ex.start(t, () => undefined);
    await until(() => {
      try {
        return alive(readTaskPid(pidFile));
      } catch {
        return false;
      }
    });
    const pid = readTaskPid(pidFile);
    process.kill(h.pid as number, 'SIGKILL');
    await until(() => !alive(pid), 3000);
  }, 20_000);

  it('stop their task when the monitor kills it, with no outcome reported', async () => {
    const ex = executor();
    ex.setDeadline('n1', 60_000);
    const { t, pidFile } = sleeper(ex, 4, 30);
    const exits: TaskExit[] = [];
    const h = ex.start(t, (e) => exits.push(e));
    await until(() => {
      try {
        return alive(readTaskPid(pidFile));
      } catch {
        return false;
      }
    });
    await h.kill();
    expect(alive(readTaskPid(pidFile))).toBe(false);
    await sleep(100);
    expect(exits).toEqual([]);
  }, 20_000);

  it('refuse a bad argument with a clear message', () => {
    const r = spawnSync(process.execPath, [supervisorScript(), '{"argv": []}'], { encoding: 'utf8' });
    expect(r.status).toBe(64);
    expect(r.stderr).toContain('bad argument');
  });
});
