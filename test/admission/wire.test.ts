import { describe, expect, it } from 'vitest';
import { AdmissionCounters } from '../../src/admission/index.ts';
import { wireAdmission } from '../../src/agent/core.ts';
import { RuIndex } from '../../src/sampling/ru-index.ts';
import { ManualClock } from '../../src/util/clock.ts';
import { SeededRng } from '../../src/util/rng.ts';
import { isTarcilError } from '../../src/util/errors.ts';
import { TEST_PROFILES } from '../support/jobs.ts';

/** RUs the admission counters should know (up, on a server that is up) and those free to take. */
function expected(state: RuIndex): { known: number; free: number } {
  let known = 0;
  let free = 0;
  for (const s of state.servers.values()) {
    for (let i = 0; i < s.ruCount; i++) {
      if (s.down || s.ruDown[i]) continue;
      known++;
      if (s.available(i)) free++;
    }
  }
  return { known, free };
}

describe('admission counters fed by a cluster view (wireAdmission)', () => {
  it('follow servers that join, are replaced by another spec, go down, come back and leave, and RUs that fill and free', () => {
    for (const seed of [1, 2, 3]) {
      const rng = new SeededRng(seed);
      const state = new RuIndex();
      const admission = new AdmissionCounters({ clock: new ManualClock(1_000_000), seed: 5 });
      wireAdmission(state, admission);
      const ids = Array.from({ length: 12 }, (_, i) => `s${i}`);
      const spec = (id: string) => ({ id, platform: rng.next() < 0.5 ? 'a' : 'b', rack: 'r0', rus: 1 + rng.int(6), speed: 1, attributes: {} });
      let job = 0;
      for (let op = 0; op < 800; op++) {
        const id = ids[rng.int(ids.length)] as string;
        const s = state.servers.get(id);
        const step = (): void => {
          const r = rng.next();
          if (!s || r < 0.1)
            state.upsertServer(spec(id)); // new, or replaced: other RUs and ids
          else if (r < 0.15) state.removeServer(id);
          else if (r < 0.22) state.setServerDown(id, !s.down);
          else if (r < 0.27) state.setBlocked(id, !s.blocked);
          else {
            const i = rng.int(s.ruCount);
            const p = TEST_PROFILES[rng.int(TEST_PROFILES.length)]!;
            const occ = rng.next() < 0.6 ? { job: `j${job++}`, task: 0, caused: p.caused, priority: 10, state: 'busy' as const } : null;
            state.setRu({ server: id, index: i }, occ, op + 1, rng.next() < 0.05);
          }
        };
        // Some changes land in a batch with others (as a list or a watch batch applies them).
        if (rng.next() < 0.2)
          state.batch(() => {
            step();
            step();
          });
        else step();
        const want = expected(state);
        expect({ seed, op, known: admission.size(), free: admission.totalFree() }).toEqual({ seed, op, known: want.known, free: want.free });
        expect(admission.snapshot().reduce((a, b) => a + b.total, 0)).toBe(want.known);
      }
    }
  });

  it('keeps RUs by their dense ids and rejects an id that is not one', () => {
    const admission = new AdmissionCounters({ clock: new ManualClock(), seed: 5 });
    const zeros = new Array<number>(admission.lsh.dims).fill(0);
    admission.updateRu(100_000, zeros, true); // far beyond what was there: room is made
    expect(admission.size()).toBe(1);
    expect(admission.bucketOfRu(100_000)).toBe(admission.lsh.bucketOf(zeros));
    expect(admission.bucketOfRu(99_999)).toBeUndefined();
    for (const bad of [-1, 1.5, Number.NaN]) {
      let err: unknown;
      try {
        admission.updateRu(bad, zeros, true);
      } catch (e) {
        err = e;
      }
      expect(isTarcilError(err, 'INVALID_ARGUMENT')).toBe(true);
      expect((err as Error).message).toMatch(/ru/);
    }
    expect(admission.size()).toBe(1);
  });
});
