/**
 * Runs the cells of one sweep on worker threads, from synchronous code: the main thread blocks
 * (Atomics.wait) until a worker hands a result over, takes it with receiveMessageOnPort, and gives
 * that worker the next cell. Each cell is an independent seeded run, so the results are the same
 * as running the cells one by one (tested); only wall-clock figures differ.
 */
import { MessageChannel, Worker, receiveMessageOnPort, type MessagePort } from 'node:worker_threads';

export interface PoolJob {
  experiment: string;
  quick: boolean;
  seed: number;
  warmupMs?: number;
  cells: number;
  workers: number;
  /**
   * The order the cells are handed out in (cell indices; default 0, 1, …): the longest first keeps
   * the last worker from starting a long cell when the others are nearly done. Results are
   * returned by cell index whatever the order.
   */
  order?: readonly number[];
  /** A result arrived (in completion order). */
  onResult(cell: number, done: number): void;
}

const here = new URL('.', import.meta.url);
const FROM_SOURCE = import.meta.url.endsWith('.ts');
const ENTRY = new URL(FROM_SOURCE ? 'worker.ts' : 'worker.js', here);
/** The sources need tsx registered in the worker first (boot.js); the compiled tree starts directly. */
const START = FROM_SOURCE ? new URL('boot.js', here) : ENTRY;

export function runCells<R>(job: PoolJob): R[] {
  const order = job.order ?? Array.from({ length: job.cells }, (_, i) => i);
  if (order.length !== job.cells || new Set(order).size !== job.cells || order.some((i) => !(i >= 0 && i < job.cells)))
    throw new Error(`a dispatch order must list each of the ${job.cells} cells once`);
  const signal = new SharedArrayBuffer(4);
  const counter = new Int32Array(signal);
  const n = Math.max(1, Math.min(job.workers, job.cells));
  const ports: MessagePort[] = [];
  const workers: Worker[] = [];
  for (let w = 0; w < n; w++) {
    const { port1, port2 } = new MessageChannel();
    ports.push(port1);
    workers.push(
      new Worker(START, {
        workerData: { entry: ENTRY.href, experiment: job.experiment, quick: job.quick, seed: job.seed, warmupMs: job.warmupMs, port: port2, signal },
        transferList: [port2],
      }),
    );
  }
  const results = new Array<R>(job.cells);
  let next = 0;
  let done = 0;
  let seen = 0;
  try {
    for (const p of ports) if (next < job.cells) p.postMessage({ cell: order[next++] });
    while (done < job.cells) {
      // Sleep until a worker signals; the timeout only re-checks the ports.
      Atomics.wait(counter, 0, seen, 1000);
      seen = Atomics.load(counter, 0);
      ports.forEach((p) => {
        for (let m = receiveMessageOnPort(p); m; m = receiveMessageOnPort(p)) {
          const msg = m.message as { cell: number; r?: R; error?: string };
          if (msg.error !== undefined) throw new Error(`cell ${msg.cell} of ${job.experiment} failed in a worker: ${msg.error}`);
          results[msg.cell] = msg.r as R;
          done++;
          job.onResult(msg.cell, done);
          if (next < job.cells) p.postMessage({ cell: order[next++] });
        }
      });
    }
  } finally {
    for (const p of ports) {
      p.postMessage({ stop: true });
      p.close();
    }
    for (const w of workers) void w.terminate();
  }
  return results;
}
