import { describe, expect, it } from 'vitest';
import { AdoptionGate } from '../../src/owner/adoption-gate.ts';
import { ManualClock } from '../../src/util/clock.ts';
import { TarcilError } from '../../src/util/errors.ts';

/** Lets promise continuations run (no time passes). */
async function settle(): Promise<void> {
  for (let i = 0; i < 10; i++) await new Promise((r) => setImmediate(r));
}

describe('adoption gate', () => {
  it('runs at most its concurrency at once and takes the queued ones as slots free', async () => {
    const clock = new ManualClock();
    const gate = new AdoptionGate(clock, { next: () => 1 }, 3);
    let running = 0;
    let most = 0;
    let done = 0;
    const all = Array.from({ length: 10 }, () =>
      gate.run(async () => {
        running++;
        most = Math.max(most, running);
        await clock.sleep(10);
        running--;
        done++;
      }),
    );
    await settle();
    expect(gate.running).toBe(3);
    expect(gate.queued).toBe(7);
    for (let i = 0; i < 10 && done < 10; i++) {
      clock.advance(10);
      await settle();
    }
    await Promise.all(all);
    expect(done).toBe(10);
    expect(most).toBe(3);
    expect(gate.queued).toBe(0);
  });

  it('slows down for every adoption while the store fails them, and recovers after a success', async () => {
    const clock = new ManualClock();
    // rng 1: each pause is its full length.
    const gate = new AdoptionGate(clock, { next: () => 1 }, 1);
    const starts: number[] = [];
    const outcomes = ['fail', 'fail', 'ok', 'ok'];
    const runs = outcomes.map((o) =>
      gate
        .run(() => {
          starts.push(clock.now());
          return o === 'fail' ? Promise.reject(new TarcilError('DEADLINE_EXCEEDED', 'get: deadline exceeded')) : Promise.resolve();
        })
        .catch(() => 'failed'),
    );
    for (let i = 0; i < 40; i++) {
      clock.advance(25);
      await settle();
    }
    expect(await Promise.all(runs)).toEqual(['failed', 'failed', undefined, undefined]);
    // 100 ms after the first failure, 200 ms after the second, none after a success.
    expect(starts[1]! - starts[0]!).toBeGreaterThanOrEqual(100);
    expect(starts[2]! - starts[1]!).toBeGreaterThanOrEqual(200);
    expect(starts[3]! - starts[2]!).toBeLessThan(50);
    expect(gate.failures).toBe(2);
    expect(gate.backoffMs).toBe(0);
  });

  it('does not pause after an error that is not the store being slow or away', async () => {
    const clock = new ManualClock();
    const gate = new AdoptionGate(clock, { next: () => 1 }, 1);
    const starts: number[] = [];
    const runs = [0, 1].map(() =>
      gate
        .run(() => {
          starts.push(clock.now());
          return Promise.reject(new TarcilError('INTERNAL', 'broken record'));
        })
        .catch(() => undefined),
    );
    await settle();
    await Promise.all(runs);
    expect(starts).toEqual([0, 0]);
    expect(gate.backoffMs).toBe(0);
  });
});
