import { describe, expect, it } from 'vitest';
import { ContentionLsh } from '../../src/admission/lsh.ts';
import { SeededRng, type Rng } from '../../src/util/rng.ts';
import { isTarcilError } from '../../src/util/errors.ts';

const N = 10;

/** Contention vectors of every shape and load: a random direction scaled to a random RMS. */
function diverse(rng: Rng): number[] {
  const dir = Array.from({ length: N }, () => (rng.next() < 0.3 ? 0 : rng.next()));
  const rms = Math.sqrt(dir.reduce((s, v) => s + v * v, 0) / N) || 1;
  const target = rng.next() * 99;
  return dir.map((v) => Math.min(99, (v / rms) * target));
}

describe('ContentionLsh', () => {
  it('uses exactly `buckets` buckets: 4 direction cells × 5 magnitude bands by default', () => {
    const lsh = new ContentionLsh({ seed: 1 });
    expect(lsh.buckets).toBe(20);
    expect(lsh.cells).toBe(4);
    expect(lsh.bands).toBe(5);
    expect([...lsh.bandEdges]).toEqual([0.04, 0.16, 0.36, 0.64].map((k) => expect.closeTo(99 * k, 9) as number));
    const rng = new SeededRng(2);
    const hits = new Array<number>(20).fill(0);
    for (let t = 0; t < 20000; t++) {
      const b = lsh.bucketOf(diverse(rng));
      expect(Number.isInteger(b) && b >= 0 && b < 20).toBe(true);
      hits[b]!++;
    }
    for (const h of hits) expect(h).toBeGreaterThan(0);
  });

  it('is deterministic for a seed and differs across seeds', () => {
    const rng = new SeededRng(3);
    const vs = Array.from({ length: 500 }, () => diverse(rng));
    const a = new ContentionLsh({ seed: 7 });
    const b = new ContentionLsh({ seed: 7 });
    const c = new ContentionLsh({ seed: 8 });
    expect(vs.map((v) => a.bucketOf(v))).toEqual(vs.map((v) => b.bucketOf(v)));
    const differ = vs.filter((v) => a.bucketOf(v) !== c.bucketOf(v)).length;
    expect(differ).toBeGreaterThan(50);
  });

  it('separates an idle RU from a saturated one pointing the same way', () => {
    for (const seed of [1, 2, 3, 4, 5]) {
      const lsh = new ContentionLsh({ seed });
      const dir = [9, 1, 4, 0, 2, 7, 3, 0, 5, 6];
      const idle = dir.map((v) => v * 0.1);
      const saturated = dir.map((v) => v * 11);
      expect(lsh.bucketOf(idle) % lsh.cells).toBe(lsh.bucketOf(saturated) % lsh.cells); // same direction cell
      expect(lsh.bucketOf(idle)).not.toBe(lsh.bucketOf(saturated));
      expect(lsh.bucketOf(new Array<number>(N).fill(0))).not.toBe(lsh.bucketOf(new Array<number>(N).fill(99)));
      expect(lsh.describe(lsh.bucketOf(idle)).band).toBe(0);
      expect(lsh.describe(lsh.bucketOf(saturated)).band).toBe(3); // RMS 51.7
      expect(lsh.describe(lsh.bucketOf(new Array<number>(N).fill(99))).band).toBe(4);
    }
  });

  it('makes similar vectors collide more often than dissimilar ones', () => {
    const lsh = new ContentionLsh({ seed: 4 });
    const rng = new SeededRng(5);
    let near = 0;
    let far = 0;
    const trials = 5000;
    for (let t = 0; t < trials; t++) {
      const v = diverse(rng);
      const w = v.map((x) => Math.max(0, Math.min(99, x + (rng.next() - 0.5) * 4)));
      if (lsh.bucketOf(v) === lsh.bucketOf(w)) near++;
      if (lsh.bucketOf(v) === lsh.bucketOf(diverse(rng))) far++;
    }
    expect(near / trials).toBeGreaterThan(0.6);
    expect(far / trials).toBeLessThan(0.2);
    expect(near).toBeGreaterThan(3 * far);
  });

  it('splits the positive orthant: every direction cell gets a fair share', () => {
    for (const seed of [1, 9, 42]) {
      const lsh = new ContentionLsh({ seed });
      const rng = new SeededRng(seed + 100);
      const cells = new Array<number>(lsh.cells).fill(0);
      const trials = 8000;
      for (let t = 0; t < trials; t++) cells[lsh.bucketOf(diverse(rng)) % lsh.cells]!++;
      for (const c of cells) expect(c / trials).toBeGreaterThan(0.1);
    }
  });

  it('direction cells are scale-invariant', () => {
    const lsh = new ContentionLsh({ seed: 6 });
    const rng = new SeededRng(7);
    for (let t = 0; t < 500; t++) {
      const v = diverse(rng);
      expect(lsh.bucketOf(v) % lsh.cells).toBe(lsh.bucketOf(v.map((x) => x * 0.37)) % lsh.cells);
    }
  });

  it('has a configurable split', () => {
    expect(new ContentionLsh({ buckets: 16 })).toMatchObject({ cells: 4, bands: 4 });
    expect(new ContentionLsh({ buckets: 10 })).toMatchObject({ cells: 2, bands: 5 });
    expect(new ContentionLsh({ buckets: 7 })).toMatchObject({ cells: 1, bands: 7 });
    expect(new ContentionLsh({ buckets: 24, directionBits: 3 })).toMatchObject({ cells: 8, bands: 3 });
    const custom = new ContentionLsh({ buckets: 8, directionBits: 1, bandEdges: [5, 20, 50] });
    expect(custom.bucketOf(new Array<number>(N).fill(4.9)) >> 1).toBe(0);
    expect(custom.bucketOf(new Array<number>(N).fill(5)) >> 1).toBe(1);
    expect(custom.bucketOf(new Array<number>(N).fill(60)) >> 1).toBe(3);
    expect(custom.describe(7)).toEqual({ bucket: 7, band: 3, cell: 1, rms: [50, Infinity] });
    const fieldOf = (fn: () => unknown): string | undefined => {
      try {
        fn();
      } catch (e) {
        return isTarcilError(e, 'INVALID_ARGUMENT') ? e.field : 'other';
      }
      return undefined;
    };
    expect(fieldOf(() => new ContentionLsh({ buckets: 20, directionBits: 3 }))).toBe('directionBits');
    expect(fieldOf(() => new ContentionLsh({ buckets: 0 }))).toBe('buckets');
    expect(fieldOf(() => new ContentionLsh({ buckets: 8, directionBits: 1, bandEdges: [5, 5, 50] }))).toBe('bandEdges');
    expect(fieldOf(() => new ContentionLsh({ buckets: 8, directionBits: 1, bandEdges: [5] }))).toBe('bandEdges');
    expect(fieldOf(() => new ContentionLsh({ centre: new Array<number>(N).fill(0) }))).toBe('centre');
    expect(fieldOf(() => custom.describe(8))).toBe('bucket');
  });
});
