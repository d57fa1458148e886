/**
 * A task's stdout and stderr as the process executor writes them on its node
 * (`<log-dir>/<job>/<task>-<revision>.stdout|.stderr`, see executor.ts), read for `tarcil logs`:
 * the whole of both files, and with `follow` what is appended while the attempt runs.
 */
import { open, readdir } from 'node:fs/promises';
import { join } from 'node:path';
import type { Clock } from '../util/clock.ts';
import { invalid, TarcilError } from '../util/errors.ts';
import type { Executor } from './executor.ts';
import type { Run } from './run.ts';

export type LogStream = 'stdout' | 'stderr';

export interface LogChunk {
  stream: LogStream;
  data: Buffer;
  /** The file, with a stream's first chunk. */
  path?: string;
}

/** How often a followed log is read again for what was appended. */
export const FOLLOW_POLL_MS = 250;
/** Largest chunk sent at once. */
const CHUNK_BYTES = 64 * 1024;

/** A job id, in a namespace (`<namespace>/<id>`) or not. */
const SAFE_ID = /^([a-z0-9][-a-z0-9]{0,62}\/)?[A-Za-z0-9._-]{1,200}$/;

/**
 * A job id that may name a directory under the log dir: a namespace's job is a directory in the
 * namespace's; no other separator, no `.` or `..`.
 */
export function checkLogJobId(job: string): string {
  const last = job.slice(job.indexOf('/') + 1);
  if (!SAFE_ID.test(job) || last === '.' || last === '..') throw invalid('job', 'must be a job id (letters, digits, . _ -, after an optional namespace/)');
  return job;
}

/**
 * The base path (without .stdout/.stderr) of the newest attempt of `task` of `job` whose files
 * are in `logDir`, or undefined when none is.
 */
export async function newestAttemptBase(logDir: string, job: string, task: number): Promise<string | undefined> {
  let names: string[];
  try {
    names = await readdir(join(logDir, checkLogJobId(job)));
  } catch {
    return undefined;
  }
  let best = -1;
  const prefix = `${task}-`;
  for (const n of names) {
    if (!n.startsWith(prefix) || !n.endsWith('.stdout')) continue;
    const rev = Number(n.slice(prefix.length, -'.stdout'.length));
    if (Number.isInteger(rev) && rev > best) best = rev;
  }
  return best < 0 ? undefined : join(logDir, job, `${task}-${best}`);
}

/**
 * Sends both files of an attempt from their start, stdout's then stderr's new bytes on each pass.
 * Without `follow` one pass; with it, passes every FOLLOW_POLL_MS while `running()` says the
 * attempt runs, and one last pass once it has ended. Stops early when `signal` aborts. `send`
 * resolves when the chunk may be followed by the next (the caller's flow control).
 */
export async function streamTaskLog(o: {
  base: string;
  follow: boolean;
  running: () => boolean;
  clock: Clock;
  signal: AbortSignal;
  send: (c: LogChunk) => Promise<void>;
}): Promise<void> {
  const offsets: Record<LogStream, number> = { stdout: 0, stderr: 0 };
  const told: Record<LogStream, boolean> = { stdout: false, stderr: false };
  const pass = async (): Promise<void> => {
    for (const stream of ['stdout', 'stderr'] as const) {
      const path = `${o.base}.${stream}`;
      let fh;
      try {
        fh = await open(path, 'r');
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code === 'ENOENT') continue;
        throw new TarcilError('INTERNAL', `cannot read ${path}: ${(e as Error).message}`);
      }
      try {
        for (;;) {
          if (o.signal.aborted) return;
          const buf = Buffer.alloc(CHUNK_BYTES);
          const { bytesRead } = await fh.read(buf, 0, CHUNK_BYTES, offsets[stream]);
          if (bytesRead === 0) break;
          offsets[stream] += bytesRead;
          await o.send({ stream, data: buf.subarray(0, bytesRead), ...(told[stream] ? {} : { path }) });
          told[stream] = true;
        }
      } finally {
        await fh.close();
      }
    }
  };
  for (;;) {
    // Read whether it runs before the pass: an attempt that ends during the pass gets one more.
    const running = o.follow && o.running();
    await pass();
    if (!running || o.signal.aborted) return;
    await new Promise<void>((resolve) => {
      const stop = (): void => {
        t.cancel();
        resolve();
      };
      const t = o.clock.setTimer(FOLLOW_POLL_MS, () => {
        o.signal.removeEventListener('abort', stop);
        resolve();
      });
      o.signal.addEventListener('abort', stop, { once: true });
    });
    if (o.signal.aborted) return;
  }
}

/**
 * A task's stdout and stderr on node `server` (`tarcil logs`): the attempt running there now, else
 * the newest one whose files are there; with `follow`, until that attempt ends. The simulated
 * executor writes none: FAILED_PRECONDITION says so.
 */
export async function readNodeTaskLog(
  node: { executor: Executor; server: string; running: ReadonlyMap<number, Run>; clock: Clock },
  req: { job: string; task: number; follow: boolean; signal: AbortSignal; send: (c: LogChunk) => Promise<void> },
): Promise<void> {
  const { job, task } = req;
  const ex = node.executor;
  if (ex.kind !== 'process' || ex.logDir === undefined) {
    throw new TarcilError(
      'FAILED_PRECONDITION',
      `node ${node.server} runs its tasks with the ${ex.kind} executor, which writes no log: task ${task} of ${job} has no stdout or stderr to show`,
    );
  }
  checkLogJobId(job);
  const run = [...node.running.values()].find((r) => r.job === job && r.task === task && r.handle?.logPath !== undefined);
  const base = run?.handle?.logPath ?? (await newestAttemptBase(ex.logDir, job, task));
  if (base === undefined)
    throw new TarcilError('NOT_FOUND', `no log of task ${task} of job ${job} on node ${node.server}: no attempt of it ran here, or its files were removed`);
  const running = (): boolean => run !== undefined && !run.stopped && node.running.get(run.ruIndex) === run;
  await streamTaskLog({ base, follow: req.follow, running, clock: node.clock, signal: req.signal, send: req.send });
}
