import { describe, expect, it } from 'vitest';
import { laterTurn, onLaterTurn, waitingForTurn } from '../../src/util/turns.ts';

function busy(ms: number): void {
  const end = performance.now() + ms;
  while (performance.now() < end) {
    /* a slice of synchronous work */
  }
}

describe('laterTurn', () => {
  it('lets a timer fire between the slices of passes that yield at the same time', async () => {
    // Ten passes yield at once, as ten watch streams opening together do. With setImmediate alone
    // all ten slices ran in one check phase and a due timer waited for all of them.
    let done = 0;
    let doneWhenTimerFired = -1;
    const timer = new Promise<void>((resolve) =>
      setTimeout(() => {
        doneWhenTimerFired = done;
        resolve();
      }, 1),
    );
    const passes = Array.from({ length: 10 }, () =>
      laterTurn().then(() => {
        busy(3);
        done++;
      }),
    );
    await Promise.all([timer, ...passes]);
    expect(done).toBe(10);
    expect(doneWhenTimerFired).toBeGreaterThanOrEqual(0);
    expect(doneWhenTimerFired).toBeLessThanOrEqual(2);
  });

  it('releases passes one per turn in the order they asked, and what a slice queues runs before the next slice', async () => {
    const log: string[] = [];
    const pass = async (name: string, slices: number) => {
      for (let i = 0; i < slices; i++) {
        await laterTurn();
        log.push(`${name}${i}`);
        setImmediate(() => log.push(`after ${name}${i}`));
      }
    };
    await Promise.all([pass('a', 3), pass('b', 2)]);
    await new Promise((r) => setImmediate(r));
    const slices = log.filter((e) => !e.startsWith('after'));
    expect(slices).toEqual(['a0', 'b0', 'a1', 'b1', 'a2']);
    // Each slice's own setImmediate ran before the next pass got its turn.
    for (let i = 0; i < log.length - 1; i++) {
      if (!log[i]!.startsWith('after')) expect(log[i + 1]).toBe(`after ${log[i]}`);
    }
    expect(waitingForTurn()).toBe(0);
  });

  it('onLaterTurn returns what the function returns, and passes its failure on', async () => {
    await expect(onLaterTurn(() => 42)).resolves.toBe(42);
    await expect(onLaterTurn(() => Promise.reject(new Error('read failed')))).rejects.toThrow('read failed');
  });
});
