/**
 * The live clock's timers, at the edge Node's setTimeout has: a delay over 2^31 − 1 ms (about 24.8
 * days) would fire after 1 ms. A simulated task of the longest duration a spec allows (7 days) on
 * a slow platform under interference asks for more than that.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { MAX_TIMEOUT_MS, SystemClock } from '../../src/util/clock.ts';

const DAY = 86_400_000;

describe('SystemClock timers', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it('does not fire a timer longer than setTimeout takes until its time, on the real timers', async () => {
    const clock = new SystemClock();
    let fired = false;
    const t = clock.setTimer(MAX_TIMEOUT_MS + 1_000, () => {
      fired = true;
    });
    // Node would have run it after 1 ms.
    await new Promise((r) => setTimeout(r, 50));
    expect(fired).toBe(false);
    t.cancel();
  });

  it('fires a 30-day timer after 30 days, not before, and a cancelled one never', () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'Date'] });
    const clock = new SystemClock();
    const fired: string[] = [];
    clock.setTimer(30 * DAY, () => fired.push('long'));
    const cancelled = clock.setTimer(40 * DAY, () => fired.push('cancelled'));
    clock.setTimer(1_000, () => fired.push('short'));
    vi.advanceTimersByTime(1_000);
    expect(fired).toEqual(['short']);
    vi.advanceTimersByTime(25 * DAY);
    expect(fired).toEqual(['short']);
    cancelled.cancel();
    vi.advanceTimersByTime(5 * DAY - 2_000);
    expect(fired).toEqual(['short']);
    vi.advanceTimersByTime(1_000);
    expect(fired).toEqual(['short', 'long']);
    vi.advanceTimersByTime(20 * DAY);
    expect(fired).toEqual(['short', 'long']);
  });
});
