import { describe, expect, it } from 'vitest';
import { RequestCounts } from '../../src/store/request-counts.ts';

describe('RequestCounts', () => {
  const kind = (k: string): string => k.split('/')[2] ?? '';

  it('counts nothing until enabled', () => {
    const c = new RequestCounts();
    c.count('write', ['/cell/rus/s1/000']);
    expect(c.on).toBe(false);
    const read = c.enable(kind);
    expect(c.on).toBe(true);
    expect(read().size).toBe(0);
  });

  it('labels each request by its kind and the distinct kinds of record it touches, sorted', () => {
    const c = new RequestCounts();
    const read = c.enable(kind);
    c.count('write', ['/cell/rus/s1/000', '/cell/tasks/j1/0p', '/cell/rus/s2/003', '/cell/members/l1']);
    c.count('write', ['/cell/members/l2', '/cell/rus/s9/001', '/cell/tasks/j2/0p']);
    c.count('read', ['/cell/jobs/j1']);
    c.count('write', ['/cell/jobs/j1']);
    expect(read()).toEqual(
      new Map([
        ['write|members+rus+tasks', 2],
        ['read|jobs', 1],
        ['write|jobs', 1],
      ]),
    );
  });

  it('past 64 distinct labels counts the rest as other, of their kind', () => {
    const c = new RequestCounts();
    const read = c.enable(kind);
    for (let i = 0; i < 64; i++) c.count('write', [`/cell/k${i}/x`]);
    c.count('write', ['/cell/new/x']);
    c.count('read', ['/cell/new/x']);
    c.count('write', ['/cell/k3/y']);
    expect(read().size).toBe(66);
    expect(read().get('write|other')).toBe(1);
    expect(read().get('read|other')).toBe(1);
    expect(read().get('write|k3')).toBe(2);
  });
});
