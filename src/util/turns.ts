/**
 * Cooperative yielding for long passes (large reads, watch snapshots, sweeps of a big job's tasks,
 * retention, a job's evaluation): `laterTurn()` resolves on a later turn of the event loop, in the
 * order they asked.
 *
 * `setImmediate` alone is not enough when several passes run at once: every callback queued
 * before the loop reaches its check phase runs in that same phase, so ten watch streams that each
 * yield between blocks still ran their ten blocks back to back, with no timer, I/O or lease
 * keepalive in between. Here a turn releases the passes that were waiting when it began, one after
 * another, only while they have taken less than `TURN_BUDGET_MS` together: a long pass gets the
 * next slot only after the loop has turned once, and a burst of short ones (a watch response that
 * wakes a hundred jobs' evaluations) does not wait a turn each, behind whatever I/O every turn
 * brings. A pass that asks during a turn is released on a later one.
 */
import { performance } from 'node:perf_hooks';

/** How long the passes released in one turn may run before the loop gets to turn. */
export const TURN_BUDGET_MS = 2;

const waiters: Array<() => void> = [];
let head = 0;
let armed = false;
/** Passes still to release in this turn (those waiting when it began), and when it began. */
let turnLeft = 0;
let turnStart = 0;

function startTurn(): void {
  turnLeft = waiters.length - head;
  turnStart = performance.now();
  releaseOne();
}

function releaseOne(): void {
  const next = waiters[head];
  waiters[head++] = noop;
  turnLeft--;
  if (head === waiters.length) {
    waiters.length = 0;
    head = 0;
  } else if (head > 1024 && head * 2 > waiters.length) {
    waiters.splice(0, head);
    head = 0;
  }
  if (next) next();
  // The next slot is decided only once the released pass has run as far as it goes without I/O:
  // its continuation is a microtask queued by next() above, and every microtask it queues (awaits
  // of settled promises) runs before a nextTick queued from a microtask.
  queueMicrotask(armAfterMicrotasks);
}

function armAfterMicrotasks(): void {
  process.nextTick(arm);
}

function arm(): void {
  if (head >= waiters.length) armed = false;
  else if (turnLeft > 0 && performance.now() - turnStart < TURN_BUDGET_MS) releaseOne();
  else setImmediate(startTurn);
}

function noop(): void {}

/** Resolves on a later turn of the event loop, after the passes that asked before it. */
export function laterTurn(): Promise<void> {
  return new Promise((resolve) => {
    waiters.push(resolve);
    if (!armed) {
      armed = true;
      setImmediate(startTurn);
    }
  });
}

/** Runs `f` on a later turn (see {@link laterTurn}). */
export async function onLaterTurn<T>(f: () => Promise<T> | T): Promise<T> {
  await laterTurn();
  return f();
}

/** Passes waiting for a turn (for tests and metrics). */
export function waitingForTurn(): number {
  return waiters.length - head;
}
