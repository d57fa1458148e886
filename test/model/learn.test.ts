import { describe, expect, it } from 'vitest';
import { ProfileLearner } from '../../src/model/learn.ts';
import { N_RESOURCES } from '../../src/model/types.ts';
import { SeededRng } from '../../src/util/rng.ts';

const vec = (f: (i: number) => number): number[] => Array.from({ length: N_RESOURCES }, (_, i) => f(i));

/** A task of real vector `real` amid pressure C: its share of expected rate under a hinge damage. */
function share(real: readonly number[], C: readonly number[], gain: number): number {
  let acc = 0;
  for (let i = 0; i < N_RESOURCES; i++) acc += Math.max(0, (C[i] as number) - (99 - (real[i] as number))) / 100;
  return 1 / (1 + gain * acc);
}

describe('profiles that learn', () => {
  it('hands out the declared vector until the class is observed, then the estimate, stable by identity', () => {
    const l = new ProfileLearner();
    const declared = vec(() => 30);
    expect(l.vector('x', declared)).toBe(declared);
    l.observe(
      'x',
      declared,
      vec(() => 10),
      1,
    );
    const v = l.vector('x', declared);
    expect(v).not.toBe(declared);
    expect(l.vector('x', declared)).toBe(v);
  });

  it('moves a wrongly declared resource toward the truth from observed slowdowns', () => {
    // The class really presses (and so is sensitive on) resource 3 at 75, declared at 40.
    const declared = vec((i) => (i === 3 ? 40 : 20));
    const real = vec((i) => (i === 3 ? 75 : 20));
    const l = new ProfileLearner();
    const rng = new SeededRng(9);
    for (let k = 0; k < 20_000; k++) {
      const C = vec(() => rng.next() * 70);
      l.observe('x', declared, C, share(real, C, 1.5));
    }
    const p = l.snapshot().get('x')!;
    expect(p.observations).toBe(20_000);
    // Closer to the truth on the wrong resource, by most of the gap.
    expect(Math.abs(p.learned[3]! - 75)).toBeLessThan(0.3 * 35);
    // And not dragged far from the truth on the resources declared right.
    for (let i = 0; i < N_RESOURCES; i++) if (i !== 3) expect(Math.abs(p.learned[i]! - 20)).toBeLessThan(10);
    // Its predictions got good: the error is a fraction of the excess slowdowns it saw (up to ~1).
    expect(p.rmse).toBeLessThan(0.1);
  });
});
