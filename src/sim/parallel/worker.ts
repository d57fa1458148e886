/**
 * A simulator worker thread: runs single cells of one experiment's sweep, on request. The
 * experiment runs as in the main thread (same quick/seed, so the same cells) with `only` set:
 * its sweep computes that one cell, hands the result over and stops the runner (SweepCellDone).
 *
 * The simulator is loaded inside a try: a worker that cannot load it answers every request with
 * the error, since the main thread, blocked until a result arrives, would otherwise wait forever.
 */
import { workerData, type MessagePort } from 'node:worker_threads';

interface Data {
  experiment: string;
  quick: boolean;
  seed: number;
  warmupMs?: number;
  port: MessagePort;
  signal: SharedArrayBuffer;
}

const d = workerData as Data;
const signal = new Int32Array(d.signal);
const send = (msg: unknown): void => {
  d.port.postMessage(msg);
  Atomics.add(signal, 0, 1);
  Atomics.notify(signal, 0);
};
const describe = (err: unknown): string => (err instanceof Error ? (err.stack ?? err.message) : String(err));

type Loaded = { run: (cell: number) => void } | { error: string };
const loaded: Promise<Loaded> = (async () => {
  try {
    const [{ EXPERIMENTS }, { SweepCellDone }, { setWarmup }] = await Promise.all([
      import('../experiments/index.ts'),
      import('../experiments/common.ts'),
      import('../run.ts'),
    ]);
    setWarmup(d.warmupMs);
    const runner = EXPERIMENTS[d.experiment];
    if (!runner) return { error: `unknown experiment ${d.experiment}` };
    return {
      run: (cell: number): void => {
        try {
          runner({ quick: d.quick, seed: d.seed, progress: () => undefined, only: { cell, done: (r) => send({ cell, r }) } });
          throw new Error(`experiment ${d.experiment} has no parallel sweep`);
        } catch (err) {
          if (err instanceof SweepCellDone) return;
          send({ cell, error: describe(err) });
        }
      },
    };
  } catch (err) {
    return { error: `the worker could not load the simulator: ${describe(err)}` };
  }
})();

d.port.on('message', (msg: { cell?: number; stop?: boolean }) => {
  if (msg.stop || msg.cell === undefined) {
    d.port.close();
    return;
  }
  const cell = msg.cell;
  void loaded.then((l) => ('error' in l ? send({ cell, error: l.error }) : l.run(cell)));
});
