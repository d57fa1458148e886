/**
 * Cooperative yielding for long passes (large reads, watch snapshots, sweeps of a big job's tasks,
 * retention): `laterTurn()` resolves on a later turn of the event loop, one waiter per turn, in the
 * order they asked.
 *
 * `setImmediate` alone is not enough when several passes run at once: every callback queued
 * before the loop reaches its check phase runs in that same phase, so ten watch streams that each
 * yield between blocks still ran their ten blocks back to back, with no timer, I/O or lease
 * keepalive in between. Here a pass gets the next slot only after the loop has turned once.
 */
const waiters: Array<() => void> = [];
let head = 0;
let armed = false;

function release(): void {
  const next = waiters[head];
  waiters[head++] = noop;
  if (head === waiters.length) {
    waiters.length = 0;
    head = 0;
  } else if (head > 1024 && head * 2 > waiters.length) {
    waiters.splice(0, head);
    head = 0;
  }
  if (next) next();
  // The next slot is armed only after the released pass has run to its next await (its
  // continuation is a microtask queued by next() above, ahead of this one), so whatever that pass
  // queued with setImmediate runs before the following pass's slot.
  queueMicrotask(arm);
}

function arm(): void {
  if (head < waiters.length) setImmediate(release);
  else armed = false;
}

function noop(): void {}

/** Resolves on a later turn of the event loop, after the passes that asked before it. */
export function laterTurn(): Promise<void> {
  return new Promise((resolve) => {
    waiters.push(resolve);
    if (!armed) {
      armed = true;
      setImmediate(release);
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
