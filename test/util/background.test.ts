/**
 * Background (src/util/background.ts): timers on the injected clock that stop at close, periodic
 * work, and the promises a component waits for when it closes.
 */
import { describe, expect, it } from 'vitest';
import { Background } from '../../src/util/background.ts';
import { ManualClock } from '../../src/util/clock.ts';

describe('Background', () => {
  it('fires a timer once at its time, and none after the timers stop', () => {
    const clock = new ManualClock();
    const bg = new Background(clock);
    const fired: string[] = [];
    bg.later(100, () => fired.push('a'));
    bg.later(300, () => fired.push('b'));
    clock.advance(150);
    expect(fired).toEqual(['a']);
    bg.stopTimers();
    expect(clock.pendingTimers()).toBe(0);
    clock.advance(1000);
    bg.later(10, () => fired.push('c'));
    clock.advance(100);
    expect(fired).toEqual(['a']);
  });

  it('runs periodic work every period until stopped', () => {
    const clock = new ManualClock();
    const bg = new Background(clock);
    let n = 0;
    bg.every(100, () => n++);
    clock.advance(50);
    expect(n).toBe(0);
    for (let i = 0; i < 5; i++) clock.advance(100);
    expect(n).toBe(5);
    bg.stopTimers();
    clock.advance(1000);
    expect(n).toBe(5);
  });

  it('settles once every tracked promise has', async () => {
    const bg = new Background(new ManualClock());
    let release!: () => void;
    const slow = new Promise<void>((r) => (release = r));
    bg.track(slow);
    bg.track(Promise.resolve());
    let done = false;
    const settled = bg.settled().then(() => (done = true));
    await Promise.resolve();
    await Promise.resolve();
    expect(done).toBe(false);
    release();
    await settled;
    expect(done).toBe(true);
  });
});
