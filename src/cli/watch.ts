/**
 * `--watch` (-w): a command's answer, then its changes until Ctrl-C. `status` follows the job's
 * WatchJob stream (the front-end pushes every change; the watch ends when the job does). `jobs`,
 * `cluster` and `explain` have no stream in the API: they ask again every `--interval` and print
 * only when the answer changed.
 */

export interface PollOptions<T> {
  intervalMs: number;
  /** What is compared between two answers: printed again only when it changes. */
  key: (x: T) => string;
  /** Stop after printing this answer (e.g. the job ended). */
  done?: (x: T) => boolean;
}

/** Resolves on Ctrl-C (SIGINT) or SIGTERM; `stop()` removes the handlers. */
export function interrupted(): { promise: Promise<void>; stop: () => void } {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => (resolve = r));
  const on = (): void => resolve();
  process.once('SIGINT', on);
  process.once('SIGTERM', on);
  return {
    promise,
    stop: () => {
      process.removeListener('SIGINT', on);
      process.removeListener('SIGTERM', on);
    },
  };
}

/**
 * Asks `fetch` every intervalMs and hands each answer that differs from the last printed one to
 * `emit` (the first always), until Ctrl-C or `done`. A failed call ends the watch with its error.
 */
export async function poll<T>(fetch: () => Promise<T>, emit: (x: T, first: boolean) => Promise<void> | void, o: PollOptions<T>): Promise<void> {
  const stop = interrupted();
  let stopped = false;
  void stop.promise.then(() => (stopped = true));
  try {
    let last: string | undefined;
    while (!stopped) {
      const x = await fetch();
      const k = o.key(x);
      if (k !== last) {
        await emit(x, last === undefined);
        last = k;
      }
      if (o.done?.(x)) return;
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([new Promise((r) => (timer = setTimeout(r, o.intervalMs))), stop.promise]);
      clearTimeout(timer);
    }
  } finally {
    stop.stop();
  }
}
