import { describe, expect, it } from 'vitest';
import { WatchEventCounts } from '../../src/store/etcd-watch.ts';

describe('WatchEventCounts', () => {
  it('sums the events of each watch by the label of its prefix, and past 20,000 prefixes counts the rest as other', () => {
    const c = new WatchEventCounts();
    const kind = (p: string): string => p.split('/')[2] ?? '';
    c.counter('/cell/rus/s1/')(3);
    c.counter('/cell/rus/s2/')(2);
    const tasks = c.counter('/cell/tasks/');
    tasks(4);
    tasks(1);
    expect(c.byLabel(kind)).toEqual(
      new Map([
        ['rus', 5],
        ['tasks', 5],
      ]),
    );
    for (let i = 0; i < 20_000; i++) c.counter(`/cell/rus/n${i}/`);
    c.counter('/cell/jobs/')(7);
    c.counter('/cell/tasks/')(1);
    expect(c.byLabel(kind).get('other')).toBe(7);
    expect(c.byLabel(kind).get('tasks')).toBe(6);
  });
});
