/**
 * The process executor's exit records: what a monitor that restarts learns about the attempts its
 * previous life started (exited by itself with a code, still running, or nothing known), which
 * of its server's attempts still run, and stopping one left running.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { ProcessExecutor, type TaskExit, type TaskLaunch } from '../../src/monitor/executor.ts';
import { SystemClock } from '../../src/util/clock.ts';

const dirs: string[] = [];
const until = async (ok: () => boolean, ms = 5000): Promise<void> => {
  const end = Date.now() + ms;
  while (!ok()) {
    if (Date.now() > end) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 20));
  }
};
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function executor(): ProcessExecutor {
  const dir = mkdtempSync(join(tmpdir(), 'tarcil-exec-'));
  dirs.push(dir);
  return new ProcessExecutor({ clock: new SystemClock(), logDir: dir, pin: false });
}

function launch(task: number, argv: string[]): TaskLaunch {
  return { job: 'j1', task, ruIndex: 0, revision: 40 + task, command: { argv } };
}

function run(ex: ProcessExecutor, t: TaskLaunch): Promise<TaskExit> {
  return new Promise((resolve) => ex.start(t, resolve));
}

/** Running (gone or a zombie waiting to be reaped by this test process both count as stopped). */
const running = (pid: number): boolean => {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return !stat.slice(stat.lastIndexOf(')') + 2).startsWith('Z');
  } catch {
    return false;
  }
};

describe('process executor exit records', () => {
  it('records the exit code of a task that ends by itself, for a monitor that restarts', async () => {
    const ex = executor();
    const ok = launch(1, ['sh', '-c', 'exit 0']);
    const bad = launch(2, ['sh', '-c', 'exit 3']);
    expect(await run(ex, ok)).toEqual({ state: 'succeeded', exitCode: 0 });
    expect(await run(ex, bad)).toMatchObject({ state: 'failed', exitCode: 3 });
    // A new executor on the same log directory: the monitor's next life.
    const next = new ProcessExecutor({ clock: new SystemClock(), logDir: ex.logDir, pin: false });
    expect(next.previousRun(ok)).toEqual({ kind: 'exited', exit: { state: 'succeeded', exitCode: 0 } });
    expect(next.previousRun(bad)).toMatchObject({ kind: 'exited', exit: { state: 'failed', exitCode: 3 } });
    expect(next.previousRun({ job: 'j1', task: 9, revision: 49 })).toEqual({ kind: 'unknown' });
  });

  it('finds an attempt still running, stops it, and then knows nothing of it (it did not end by itself)', async () => {
    const ex = executor();
    const t = launch(3, ['sleep', '30']);
    const h = ex.start(t, () => undefined);
    const next = new ProcessExecutor({ clock: new SystemClock(), logDir: ex.logDir, pin: false });
    expect(running(h.pid as number)).toBe(true);
    // The task runs in a process group of its own under its supervisor (h.pid), which names it.
    await until(() => next.previousRun(t).kind === 'running');
    const prev = next.previousRun(t);
    if (prev.kind !== 'running') throw new Error('not running');
    expect(prev.pid).not.toBe(h.pid);
    expect(running(prev.pid)).toBe(true);
    // Another attempt of the same task (another revision) is not this process.
    expect(next.previousRun({ ...t, revision: t.revision + 1 })).toEqual({ kind: 'unknown' });
    expect(await next.stopOrphan(t, prev.pid)).toBeUndefined();
    expect(running(prev.pid)).toBe(false);
    // Its supervisor, seeing its task gone, ends too.
    await until(() => !running(h.pid as number));
    expect(next.previousRun(t)).toEqual({ kind: 'unknown' });
  });

  it("lists the attempts of its own server a previous life left running, not another server's in a shared log dir", async () => {
    const ex = executor();
    const mine = { ...launch(6, ['sleep', '30']), server: 'A' };
    const ended = { ...launch(7, ['sh', '-c', 'exit 0']), server: 'A' };
    const theirs = { ...launch(8, ['sleep', '30']), server: 'B' };
    const hMine = ex.start(mine, () => undefined);
    const hTheirs = ex.start(theirs, () => undefined);
    await run(ex, ended);
    const next = new ProcessExecutor({ clock: new SystemClock(), logDir: ex.logDir, pin: false });
    await until(() => next.leftRunning('A').length === 1 && next.leftRunning('B').length === 1);
    const [a] = next.leftRunning('A');
    expect(a).toMatchObject({ job: 'j1', task: 6, revision: 46 });
    expect(next.leftRunning('B')).toMatchObject([{ job: 'j1', task: 8, revision: 48 }]);
    expect(next.leftRunning('C')).toEqual([]);
    await next.stopOrphan(mine, a!.pid);
    expect(next.leftRunning('A')).toEqual([]);
    expect(next.leftRunning('B')).toHaveLength(1);
    await Promise.all([hMine.kill(), hTheirs.kill()]);
    expect(next.leftRunning('B')).toEqual([]);
  });

  it('leaves no exit record for a task it kills, and names a program it cannot start', async () => {
    const ex = executor();
    const t = launch(4, ['sleep', '30']);
    const h = ex.start(t, () => undefined);
    await h.kill();
    expect(ex.previousRun(t)).toEqual({ kind: 'unknown' });
    const missing = await run(ex, launch(5, ['no-such-program-xyz']));
    expect(missing).toMatchObject({ state: 'failed', exitCode: 127 });
    expect(missing.message).toContain('cannot start no-such-program-xyz');
  });
});
