/**
 * The cause a conflicting placement commit is counted under, from what its transaction read back.
 */
import { describe, expect, it } from 'vitest';
import { conflictCause } from '../../src/agent/conflict-cause.ts';
import { Keys } from '../../src/state/keys.ts';
import type { KeyValue } from '../../src/store/types.ts';

const keys = new Keys('/t/');
const refs = [
  { server: 's1', index: 0 },
  { server: 's2', index: 3 },
];
const kv = (i: number, value: object | undefined): KeyValue[] =>
  value ? [{ key: keys.ru(refs[i]!), value: JSON.stringify(value), modRevision: 9, createRevision: 1, version: 2 } as KeyValue] : [];
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
    expect(conflictCause('fe1/a1', keys, refs, reads, (i) => !changed.includes(i))).toBe(cause);
  });
});
