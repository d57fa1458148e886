/**
 * The occupant an RU record describes (occupantOf): what the view keeps of a busy RU, and that
 * occupants of one workload share one caused vector however many records brought it.
 */
import { describe, expect, it } from 'vitest';
import { occupantOf, type PlacedRuRecord } from '../../src/state/records.ts';

const placed = (task: number, caused: number[]): PlacedRuRecord =>
  // What a watch delivers: a record parsed from its stored value, its own arrays.
  JSON.parse(JSON.stringify({ state: 'busy', job: 'j1', task, caused, priority: 2, agent: 'a', since: 1, attempt: 0, q: 0.75 })) as PlacedRuRecord;

describe('occupantOf', () => {
  it('a busy RU: its job, task, vector, priority and Q; a free one: nobody', () => {
    expect(occupantOf(placed(3, [10, 20, 30]))).toEqual({ job: 'j1', task: 3, caused: [10, 20, 30], priority: 2, state: 'busy', q: 0.75 });
    expect(occupantOf({ state: 'free' })).toBeNull();
    expect(occupantOf(undefined)).toBeNull();
  });

  it('records of one vector share one array (what scoring derives from a resident is kept by it), other vectors do not', () => {
    const a = occupantOf(placed(1, [5, 6, 7]));
    const b = occupantOf(placed(2, [5, 6, 7]));
    const c = occupantOf(placed(3, [5, 6, 8]));
    expect(a?.caused).toBe(b?.caused);
    expect(c?.caused).not.toBe(a?.caused);
    expect(c?.caused).toEqual([5, 6, 8]);
  });
});
