import { describe, expect, it } from 'vitest';
import { RecentEnds } from '../../src/owner/recent-ends.ts';
import { ManualClock } from '../../src/util/clock.ts';

/** The task ends a front-end keeps for an adoption: by age and by count. */
describe('RecentEnds', () => {
  const ref = (index: number) => ({ server: 's0', index });

  it('gives a job its ends, oldest first, as often as asked, and drops them after keepMs', () => {
    const clock = new ManualClock();
    const ends = new RecentEnds(clock, 1000, 100);
    ends.add('a', 'a0', 10, ref(0));
    clock.advance(600);
    ends.add('b', 'b0', 11, ref(1));
    ends.add('a', 'a1', 12, ref(2));
    expect(ends.size).toBe(3);
    expect(ends.of('a').map((e) => e.value)).toEqual(['a0', 'a1']);
    clock.advance(500);
    // a0 is 1,100 ms old: gone; a1 and b0 are not, and stay after being read.
    expect(ends.of('a').map((e) => [e.value, e.rev])).toEqual([['a1', 12]]);
    expect(ends.of('a').map((e) => e.value)).toEqual(['a1']);
    expect(ends.size).toBe(2);
    ends.add('a', 'a2', 14, ref(4));
    clock.advance(600);
    expect(ends.of('b')).toEqual([]);
    expect(ends.of('a').map((e) => e.value)).toEqual(['a2']);
    expect(ends.size).toBe(1);
    expect(ends.keptChars).toBe(2);
  });

  it('keeps at most max ends, dropping the oldest', () => {
    const clock = new ManualClock();
    const ends = new RecentEnds(clock, 60_000, 3);
    for (let i = 0; i < 5; i++) ends.add(`j${i % 2}`, `v${i}`, i, ref(i));
    expect(ends.size).toBe(3);
    expect(ends.keptChars).toBe(6);
    expect(ends.of('j0').map((e) => e.value)).toEqual(['v2', 'v4']);
    expect(ends.of('j1').map((e) => e.value)).toEqual(['v3']);
    ends.add('j2', 'v5', 5, ref(5));
    expect(ends.of('j0').map((e) => e.value)).toEqual(['v4']);
    expect(ends.size).toBe(3);
  });
});
