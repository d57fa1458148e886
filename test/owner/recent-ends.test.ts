import { describe, expect, it } from 'vitest';
import { RecentEnds } from '../../src/owner/recent-ends.ts';
import { ManualClock } from '../../src/util/clock.ts';

/** The ends of jobs owned elsewhere that a front-end keeps for an adoption: by age and by count. */
describe('RecentEnds', () => {
  const ref = (index: number) => ({ server: 's0', index });

  it('hands a job its ends once, oldest first, and drops them after keepMs', () => {
    const clock = new ManualClock();
    const ends = new RecentEnds(clock, 1000, 100);
    ends.add('a', 'a0', 10, ref(0));
    clock.advance(600);
    ends.add('b', 'b0', 11, ref(1));
    ends.add('a', 'a1', 12, ref(2));
    expect(ends.size).toBe(3);
    clock.advance(500);
    // a0 is 1,100 ms old: gone at the next add; a1 and b0 are not.
    ends.add('c', 'c0', 13, ref(3));
    expect(ends.take('a').map((e) => [e.value, e.rev])).toEqual([['a1', 12]]);
    expect(ends.take('a')).toEqual([]);
    expect(ends.size).toBe(2);
    // Taken ends are not dropped twice; a later end of the same job outlives the older entries.
    ends.add('a', 'a2', 14, ref(4));
    clock.advance(600);
    ends.add('d', 'd0', 15, ref(5));
    expect(ends.take('b')).toEqual([]);
    expect(ends.take('a').map((e) => e.value)).toEqual(['a2']);
    expect(ends.take('c').map((e) => e.value)).toEqual(['c0']);
    expect(ends.size).toBe(1);
  });

  it('keeps at most max ends, dropping the oldest', () => {
    const clock = new ManualClock();
    const ends = new RecentEnds(clock, 60_000, 3);
    for (let i = 0; i < 5; i++) ends.add(`j${i % 2}`, `v${i}`, i, ref(i));
    expect(ends.size).toBe(3);
    expect(ends.keptChars).toBe(6);
    expect(ends.take('j0').map((e) => e.value)).toEqual(['v2', 'v4']);
    expect(ends.take('j1').map((e) => e.value)).toEqual(['v3']);
    expect(ends.size).toBe(0);
    expect(ends.keptChars).toBe(0);
  });
});
