/**
 * Step timestamps along a job's way from submission to running, to see where the time goes
 * (`bench/trace-stages.ts` reads them). Off unless the environment names a directory in
 * TARCIL_TRACE_DIR (or a test calls {@link openTrace}): each process then appends lines
 * `<epoch ms, to the µs> <point> <job id or job#task>` to `<dir>/<pid>.trace`, buffered and
 * written every second and at exit. The processes of one machine share its clock, so their lines
 * can be put side by side.
 *
 * Off, a point costs a call and a test; callers that would build an id string test
 * {@link tracingOn} first.
 */
import { appendFileSync } from 'node:fs';
import { join } from 'node:path';

let file: string | undefined;
let lines: string[] = [];
let timer: NodeJS.Timeout | undefined;

let tracing = false;

/** Whether points are being written. */
export function tracingOn(): boolean {
  return tracing;
}

/** Transactions (requests to the store) and the job or task each carries, for the store's own points. */
export const traceIds = new WeakMap<object, string>();

const FLUSH_AT = 4096;

function stamp(): string {
  return (performance.timeOrigin + performance.now()).toFixed(3);
}

/** Records a point for a job (`job`) or a task (`job#task`) now. */
export function trace(point: string, id: string): void {
  if (!tracing) return;
  lines.push(`${stamp()} ${point} ${id}`);
  if (lines.length >= FLUSH_AT) flushTrace();
}

/** Records a point for a request to the store and marks the request with the id (see {@link traceRequests}). */
export function traceRequest(point: string, id: string, req: object): void {
  if (!tracing) return;
  traceIds.set(req, id);
  trace(point, id);
}

/** Records a point at a time already taken (epoch ms). */
export function traceAt(point: string, id: string, atMs: number): void {
  if (!tracing) return;
  lines.push(`${atMs.toFixed(3)} ${point} ${id}`);
  if (lines.length >= FLUSH_AT) flushTrace();
}

/** Records a point for each request of `reqs` that carries an id (see {@link traceIds}). */
export function traceRequests(point: string, reqs: readonly object[]): void {
  if (!tracing) return;
  const at = stamp();
  for (const r of reqs) {
    const id = traceIds.get(r);
    if (id !== undefined) lines.push(`${at} ${point} ${id}`);
  }
  if (lines.length >= FLUSH_AT) flushTrace();
}

/** Writes what is buffered. */
export function flushTrace(): void {
  if (!file || lines.length === 0) return;
  const out = lines;
  lines = [];
  appendFileSync(file, `${out.join('\n')}\n`);
}

/** Starts writing points to `<dir>/<pid>.trace`; returns the file. */
export function openTrace(dir: string): string {
  closeTrace();
  file = join(dir, `${process.pid}.trace`);
  tracing = true;
  timer = setInterval(flushTrace, 1000);
  timer.unref();
  return file;
}

/** Writes what is buffered and stops. */
export function closeTrace(): void {
  flushTrace();
  if (timer) clearInterval(timer);
  timer = undefined;
  file = undefined;
  tracing = false;
}

const fromEnv = process.env.TARCIL_TRACE_DIR;
if (fromEnv) {
  openTrace(fromEnv);
  process.on('exit', flushTrace);
}
