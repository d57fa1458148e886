import { describe, expect, it } from 'vitest';
import { moveWorthIt, runtimeLoopConfig } from '../../src/monitor/runtime-loop.ts';

describe("a move's estimate", () => {
  const c = runtimeLoopConfig({ slowBelow: 0.5, recoverAbove: 0.6, movePauseMs: 1000, minGain: 0.2 });

  it('counts the restart at the recovery share, not as if the new RU had no neighbours', () => {
    // 80 s of work left at 0.4 = 200 s. A restart of 100 s of work: 101 s alone (saves 99 s, half
    // of 200), but 1 + 100/0.6 = 167.7 s at the recovery share (saves 32 s, 16%: under a fifth).
    expect(moveWorthIt({ remaining: 80_000, rateNow: 0.4, work: 100_000, rateAfter: 1 }, c)).toBe(false);
    // 95 s left at 0.25 = 380 s: it pays even at the recovery share (saves 212 s).
    expect(moveWorthIt({ remaining: 95_000, rateNow: 0.25, work: 100_000, rateAfter: 1 }, c)).toBe(true);
  });

  it('reads the recovery share it is given', () => {
    const o = { remaining: 80_000, rateNow: 0.4, work: 100_000, rateAfter: 1 };
    expect(moveWorthIt(o, runtimeLoopConfig({ slowBelow: 0.5, recoverAbove: 1, movePauseMs: 1000, minGain: 0.2 }))).toBe(true);
    expect(moveWorthIt(o, c)).toBe(false);
  });
});
