import { describe, expect, it } from 'vitest';
import { SharedBackoff } from '../../src/util/backoff.ts';
import { TarcilError } from '../../src/util/errors.ts';

const slow = new TarcilError('DEADLINE_EXCEEDED', 'store slow');

describe('SharedBackoff', () => {
  it('doubles on each transient failure up to its bound, is reset by a success, and ignores other errors', () => {
    const b = new SharedBackoff(200, 2000, { next: () => 1 });
    expect(b.pauseMs).toBe(0);
    const pauses: number[] = [];
    for (let i = 0; i < 6; i++) {
      b.failed(slow);
      pauses.push(b.pauseMs);
    }
    expect(pauses).toEqual([200, 400, 800, 1600, 2000, 2000]);
    b.failed(new TarcilError('INVALID_ARGUMENT', 'bad'));
    b.failed(new Error('not a store error'));
    expect(b.failures).toBe(6);
    b.succeeded();
    expect(b.pauseMs).toBe(0);
    b.failed(new TarcilError('UNAVAILABLE', 'down'));
    expect(b.pauseMs).toBe(200);
  });

  it('draws each wait between half and all of the shared pause, never less than half the first bound', () => {
    let r = 0;
    const b = new SharedBackoff(200, 2000, { next: () => r });
    expect(b.delayMs()).toBe(100);
    for (let i = 0; i < 4; i++) b.failed(slow); // pause 1600
    r = 0;
    expect(b.delayMs()).toBe(800);
    r = 0.5;
    expect(b.delayMs()).toBe(1200);
    r = 0.999999;
    expect(b.delayMs()).toBeCloseTo(1600, 0);
  });
});
