import { describe, expect, it } from 'vitest';
import { IndexedSet } from '../../src/sampling/indexed-set.ts';
import { SeededRng } from '../../src/util/rng.ts';

describe('IndexedSet', () => {
  it('matches a Set under random adds and deletes, with every member reachable by position', () => {
    const rng = new SeededRng(3);
    const s = new IndexedSet();
    const ref = new Set<number>();
    for (let i = 0; i < 20_000; i++) {
      const x = rng.int(5000);
      if (rng.next() < 0.55) {
        expect(s.add(x)).toBe(!ref.has(x));
        ref.add(x);
      } else {
        expect(s.delete(x)).toBe(ref.has(x));
        ref.delete(x);
      }
    }
    expect(s.size).toBe(ref.size);
    const seen = new Set<number>();
    for (let i = 0; i < s.size; i++) seen.add(s.at(i));
    expect(seen).toEqual(ref);
    for (const x of ref) expect(s.has(x)).toBe(true);
    expect(s.has(999_999)).toBe(false);
  });
});
