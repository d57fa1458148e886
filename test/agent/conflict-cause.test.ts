/**
 * The cause a conflicting placement commit is counted under, from what its transaction read back
 * and from the view. Every read-back record here is at revision 9: a pick compared at 9 (or, not
 * read back, compared absent) did not change in the store; one compared at 5 did.
 */
import { describe, expect, it } from 'vitest';
import { conflictRead, frontEndRace } from '../../src/agent/conflict-cause.ts';
import { Keys } from '../../src/state/keys.ts';
import type { KeyValue } from '../../src/store/types.ts';

const keys = new Keys('/t/');
const refs = [
  { server: 's1', index: 0 },
  { server: 's2', index: 3 },
];
const kv = (i: number, value: object | undefined): KeyValue[] =>
  value ? [{ key: keys.ru(refs[i]!), value: JSON.stringify(value), modRevision: 9, createRevision: 1, version: 2 } as KeyValue] : [];
/** The cause alone, and the rival's time alone, of what conflictRead finds. */
const conflictCause = (...args: Parameters<typeof conflictRead>) => conflictRead(...args).cause;
const rivalSince = (agent: string, k: Keys, r: typeof refs, reads: KeyValue[][]) => conflictRead(agent, k, r, [], reads, () => true).rivalSince;
const busy = (agent?: string): object => ({ state: 'busy', job: 'j', task: 0, ...(agent ? { agent } : {}) });

describe('conflictCause', () => {
  it.each([
    { name: 'a pick held by another front-end', reads: [kv(0, busy('fe2/a1')), kv(1, { state: 'free' })], changed: [0], cause: 'front-end' },
    { name: 'a reservation of another front-end', reads: [kv(0, { ...busy('fe2/a3'), state: 'reserved' })], changed: [0], cause: 'front-end' },
    { name: 'a pick held by a sibling agent', reads: [kv(0, busy('fe1/a2'))], changed: [0], cause: 'sibling' },
    { name: 'another front-end outranks a sibling', reads: [kv(0, busy('fe1/a2')), kv(1, busy('fe3/a1'))], changed: [0, 1], cause: 'front-end' },
    { name: 'a pick changed and free again', reads: [kv(0, { state: 'free' })], changed: [0], cause: 'stale' },
    { name: 'a pick held by a placement naming no agent', reads: [kv(0, busy())], changed: [0], cause: 'stale' },
    { name: 'a pick gone from the store', reads: [[]], changed: [0], cause: 'stale' },
    { name: 'no pick changed (the fence or a quota did)', reads: [kv(0, busy('fe2/a1'))], changed: [], cause: 'other' },
  ])('$name: $cause', ({ reads, changed, cause }) => {
    const compared = refs.map((_, i) => (changed.includes(i) ? 5 : (reads[i]?.length ?? 0) > 0 ? 9 : 0));
    // The view agrees with the store here.
    expect(conflictCause('fe1/a1', keys, refs, compared, reads, (i) => !changed.includes(i))).toBe(cause);
  });

  it('takes the store over a view that lags behind it: a pick the view still shows as decided was taken', () => {
    const reads = [kv(0, busy('fe2/a1')), kv(1, { state: 'free' })];
    expect(conflictCause('fe1/a1', keys, refs, [5, 9], reads, () => true)).toBe('front-end');
    expect(conflictCause('fe1/a1', keys, refs, [9, 5], reads, () => true)).toBe('stale');
    // Compared absent and still absent: unchanged.
    expect(conflictCause('fe1/a1', keys, refs, [0, 9], [[], kv(1, { state: 'free' })], () => true)).toBe('other');
  });

  it('counts a pick the view saw change even when the store reads back what was compared (server scope: an epoch moved)', () => {
    expect(conflictCause('fe1/a1', keys, refs, [9, 9], [kv(0, { state: 'free' })], (i) => i !== 0)).toBe('stale');
  });
});

describe('rivalSince and frontEndRace', () => {
  it("takes the latest placement time among the picks another front-end holds, ignoring this process's and free ones", () => {
    const reads = [kv(0, { ...busy('fe2/a1'), since: 1_000 }), kv(1, { ...busy('fe3/a2'), since: 1_500 })];
    expect(rivalSince('fe1/a1', keys, refs, reads)).toBe(1_500);
    expect(rivalSince('fe1/a1', keys, refs, [kv(0, { ...busy('fe1/a2'), since: 1_000 }), kv(1, { state: 'free', since: 2_000 })])).toBeUndefined();
    expect(rivalSince('fe1/a1', keys, refs, [kv(0, { ...busy('fe1/a2'), since: 1_000 }), kv(1, { ...busy('fe2/a1'), since: 700 })])).toBe(700);
    // A holder naming no time counts for nothing.
    expect(rivalSince('fe1/a1', keys, refs, [kv(0, busy('fe2/a1'))])).toBeUndefined();
  });

  it('names the pick the rival placed last, whose server decides whether the homes turned in between', () => {
    const read = (reads: KeyValue[][]) => conflictRead('fe1/a1', keys, refs, [5, 5], reads, () => false);
    expect(read([kv(0, { ...busy('fe2/a1'), since: 1_000 }), kv(1, { ...busy('fe3/a2'), since: 1_500 })])).toMatchObject({ rivalPick: 1, rivalSince: 1_500 });
    expect(read([kv(0, { ...busy('fe2/a1'), since: 2_000 }), kv(1, { ...busy('fe3/a2'), since: 1_500 })])).toMatchObject({ rivalPick: 0, rivalSince: 2_000 });
    expect(read([kv(0, { ...busy('fe1/a2'), since: 2_000 }), kv(1, { state: 'free' })])).toMatchObject({ rivalPick: undefined, rivalSince: undefined });
  });

  it("says turn when the pick's server changed home in between, else whether the sampling was split", () => {
    expect(frontEndRace(true, true)).toBe('turn');
    expect(frontEndRace(true, false)).toBe('turn');
    expect(frontEndRace(false, true)).toBe('split');
    expect(frontEndRace(false, false)).toBe('unsplit');
  });
});
