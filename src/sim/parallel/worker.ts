/**
 * A simulator worker thread: runs single cells of one experiment's sweep, on request. The
 * experiment runs as in the main thread (same quick/seed, so the same cells) with `only` set:
 * its sweep computes that one cell, hands the result over and stops the runner (SweepCellDone).
 */
import { workerData, type MessagePort } from 'node:worker_threads';
import { EXPERIMENTS } from '../experiments/index.ts';
import { SweepCellDone } from '../experiments/common.ts';
import { setWarmup } from '../run.ts';

interface Data {
  experiment: string;
  quick: boolean;
  seed: number;
  warmupMs?: number;
  port: MessagePort;
  signal: SharedArrayBuffer;
}

const d = workerData as Data;
setWarmup(d.warmupMs);
const signal = new Int32Array(d.signal);
const send = (msg: unknown): void => {
  d.port.postMessage(msg);
  Atomics.add(signal, 0, 1);
  Atomics.notify(signal, 0);
};

d.port.on('message', (msg: { cell?: number; stop?: boolean }) => {
  if (msg.stop || msg.cell === undefined) {
    d.port.close();
    return;
  }
  const cell = msg.cell;
  const runner = EXPERIMENTS[d.experiment];
  try {
    if (!runner) throw new Error(`unknown experiment ${d.experiment}`);
    runner({ quick: d.quick, seed: d.seed, progress: () => undefined, only: { cell, done: (r) => send({ cell, r }) } });
    throw new Error(`experiment ${d.experiment} has no parallel sweep`);
  } catch (err) {
    if (err instanceof SweepCellDone) return;
    send({ cell, error: err instanceof Error ? (err.stack ?? err.message) : String(err) });
  }
});
