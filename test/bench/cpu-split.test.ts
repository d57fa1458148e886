/**
 * bench/cpu-split.ts's inclusive time: a function's share of a profile's busy time counts every
 * sample with it anywhere on the stack, once, and idle samples count for nothing.
 */
import { describe, expect, it } from 'vitest';
import { inclusiveShares, type Profile } from '../../bench/cpu-split.ts';

describe('cpu-split --inclusive', () => {
  it('counts a function once per sample whose stack holds it, by name and file', () => {
    const frame = (functionName: string, url: string) => ({ functionName, url });
    // (root) → handle (a.ts) → apply (b.ts) → handle (a.ts, recursive); (root) → apply (c.ts); (idle)
    const profile: Profile = {
      nodes: [
        { id: 1, callFrame: frame('(root)', ''), children: [2, 5, 6] },
        { id: 2, callFrame: frame('Guard.handle', 'file:///x/src/a.ts'), children: [3] },
        { id: 3, callFrame: frame('apply', 'file:///x/src/b.ts'), children: [4] },
        { id: 4, callFrame: frame('handle', 'file:///x/src/a.ts'), children: [] },
        { id: 5, callFrame: frame('apply', 'file:///x/src/c.ts'), children: [] },
        { id: 6, callFrame: frame('(idle)', ''), children: [] },
      ],
      // timeDeltas[i + 1] is sample i's time: 10 in node 2, 20 in node 4, 30 in node 5, 40 idle.
      samples: [2, 4, 5, 6],
      timeDeltas: [0, 10, 20, 30, 40],
      startTime: 0,
      endTime: 100,
    };
    const [handle, applyB, applyAny, none] = inclusiveShares(profile, ['handle@a.ts', 'apply@b.ts', 'apply', 'missing']);
    expect(handle).toBeCloseTo(30 / 60);
    expect(applyB).toBeCloseTo(20 / 60);
    expect(applyAny).toBeCloseTo(50 / 60);
    expect(none).toBe(0);
  });
});
