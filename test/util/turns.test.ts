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

  it('releases passes in the order they asked; one that asks again waits for a later turn, after what its slice queued', async () => {
    const log: string[] = [];
    const turnOf = new Map<string, number>();
    let turn = 0;
    let ticking = true;
    const tick = () => {
      turn++;
      if (ticking) setImmediate(tick);
    };
    setImmediate(tick);
    const pass = async (name: string, slices: number) => {
      for (let i = 0; i < slices; i++) {
        await laterTurn();
        log.push(`${name}${i}`);
        turnOf.set(`${name}${i}`, turn);
        setImmediate(() => log.push(`after ${name}${i}`));
      }
    };
    await Promise.all([pass('a', 3), pass('b', 2)]);
    ticking = false;
    await new Promise((r) => setImmediate(r));
    const slices = log.filter((e) => !e.startsWith('after'));
    expect(slices).toEqual(['a0', 'b0', 'a1', 'b1', 'a2']);
    // Each pass's next slice came on a later turn than its last, after what that slice queued.
    for (const [x, y] of [
      ['a0', 'a1'],
      ['a1', 'a2'],
      ['b0', 'b1'],
    ] as const) {
      expect(turnOf.get(y)!).toBeGreaterThan(turnOf.get(x)!);
      expect(log.indexOf(`after ${x}`)).toBeLessThan(log.indexOf(y));
    }
    expect(waitingForTurn()).toBe(0);
  });

  it('releases a burst of short passes in one turn, not one turn each', async () => {
    // A watch response that wakes a hundred jobs' evaluations: each used to wait a turn of its
    // own, and every turn of a busy process carries its I/O.
    let turn = 0;
    let ticking = true;
    const tick = () => {
      turn++;
      if (ticking) setImmediate(tick);
    };
    setImmediate(tick);
    const turns = await Promise.all(Array.from({ length: 100 }, () => laterTurn().then(() => turn)));
    ticking = false;
    expect(new Set(turns).size).toBe(1);
    expect(waitingForTurn()).toBe(0);
  });

  it("counts a pass's work after awaits of settled promises against the turn's budget", async () => {
    // On the embedded store a pass's reads settle without I/O: its work runs in microtasks after
    // its release, and the next pass must not be released before that work is seen.
    let turn = 0;
    let ticking = true;
    const tick = () => {
      turn++;
      if (ticking) setImmediate(tick);
    };
    setImmediate(tick);
    const turns = await Promise.all(
      Array.from({ length: 6 }, async () => {
        await laterTurn();
        await Promise.resolve();
        await new Promise((r) => r(undefined));
        busy(3);
        return turn;
      }),
    );
    ticking = false;
    expect(new Set(turns).size).toBe(6);
  });

  it('onLaterTurn returns what the function returns, and passes its failure on', async () => {
    await expect(onLaterTurn(() => 42)).resolves.toBe(42);
    await expect(onLaterTurn(() => Promise.reject(new Error('read failed')))).rejects.toThrow('read failed');
  });
});
