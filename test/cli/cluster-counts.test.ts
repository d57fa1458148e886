import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { clusterSummary, serverList } from '../../src/cli/cluster-view.ts';
import type { Cluster__Output } from '../../src/rpc/gen/tarcil/v1/Cluster.ts';
import type { Server__Output } from '../../src/rpc/gen/tarcil/v1/Server.ts';
import { startDemoCell, submit, unary } from '../support/live.ts';
import { until } from '../support/until.ts';

/** The rows of the first table in lines whose header starts with `first`: cells by column name. */
function tableRows(lines: string[], first: string): Record<string, string>[] {
  const text = lines.join('\n').split('\n');
  const cells = (l: string): string[] =>
    l
      .split('│')
      .slice(1, -1)
      .map((c) => c.trim());
  const at = text.findIndex((l) => cells(l)[0] === first);
  expect(at, `a table headed ${first}`).toBeGreaterThanOrEqual(0);
  const head = cells(text[at] ?? '');
  const rows: Record<string, string>[] = [];
  for (const l of text.slice(at + 1)) {
    if (l.startsWith('└')) break;
    const c = cells(l);
    if (c.length !== head.length) continue;
    rows.push(Object.fromEntries(head.map((h, i) => [h, c[i] ?? ''])));
  }
  return rows;
}

const n = (s: string | undefined): number => {
  expect(s, 'a count').toMatch(/^\d+$/);
  return Number(s);
};

/** Every view of the cell adds up to its servers and RUs. */
function expectCountsAddUp(cl: Cluster__Output): void {
  const rus = cl.servers.reduce((a, s) => a + s.rus.length, 0);
  expect(cl.rus).toBe(rus);
  // The API's totals.
  expect(cl.free + cl.busy + cl.unschedulable + cl.down).toBe(rus);

  const summary = clusterSummary(cl, false);
  const wide = clusterSummary(cl, true);
  // The totals line.
  const m = /(\d+) servers, (\d+) RUs: (\d+) free, (\d+) busy(?:, (\d+) unschedulable \([^)]*\))?, (\d+) down;/.exec(summary.join('\n'));
  expect(m, summary.join('\n')).not.toBeNull();
  const [, servers, total, free, busy, unsched, down] = m ?? [];
  expect(n(servers)).toBe(cl.servers.length);
  expect(n(total)).toBe(rus);
  expect(n(free) + n(busy) + (unsched === undefined ? 0 : n(unsched)) + n(down)).toBe(rus);

  // The platform and rack tables, plain and wide: each row, and their sums.
  for (const [view, key] of [
    [summary, 'platform'],
    [summary, 'rack'],
    [wide, 'platform'],
    [wide, 'rack'],
  ] as const) {
    const rows = tableRows(view, key);
    expect(rows.length).toBeGreaterThan(0);
    let sumServers = 0;
    let sumRus = 0;
    let sumFree = 0;
    for (const r of rows) {
      expect(n(r['up']) + n(r['down'])).toBe(n(r['servers']));
      expect(n(r['free']) + n(r['busy']) + n(r['reserved']) + n(r['unschedulable']) + n(r['RUs down'])).toBe(n(r['RUs']));
      sumServers += n(r['servers']);
      sumRus += n(r['RUs']);
      sumFree += n(r['free']);
    }
    expect(sumServers).toBe(cl.servers.length);
    expect(sumRus).toBe(rus);
    // The tables' free RUs are the totals line's.
    expect(sumFree).toBe(cl.free);
  }

  // A row per server: free + busy + the RUs down (x in the map) = its RUs; their sums.
  const rows = tableRows(serverList(cl, {}, false), 'server');
  expect(rows.length).toBe(cl.servers.length);
  let sum = 0;
  let freeUp = 0;
  for (const r of rows) {
    const map = Object.entries(r).find(([k]) => k.startsWith('RUs ('))?.[1] ?? '';
    const down = [...map].filter((c) => c === 'x').length;
    expect(n(r['free']) + n(r['busy']) + down).toBe(map.length);
    sum += map.length;
    if (r['state'] === 'up') freeUp += n(r['free']);
  }
  expect(sum).toBe(rus);
  expect(freeUp).toBe(cl.free);
}

describe('tarcil cluster: every view adds up to the cell', () => {
  let cell: Awaited<ReturnType<typeof startDemoCell>>;
  const cluster = (): Promise<Cluster__Output> => unary<object, Cluster__Output>(cell.client, 'GetCluster', {});
  beforeAll(async () => {
    cell = await startDemoCell({ prefix: '/counts/', name: 'counts', seed: 7, agents: 1 });
    await until('the demo cell registered', async () => (await cluster()).servers.length === 10);
  });
  afterAll(async () => cell.close());

  it('idle, with running tasks, after a cordon, a drain with tasks left, a drain of an idle node and an uncordon', async () => {
    expectCountsAddUp(await cluster());

    await submit(cell.client, { specJson: JSON.stringify({ name: 'long', profile: 'spark-lr', tasks: 8, durationMs: 600_000 }) });
    await until('8 RUs busy', async () => (await cluster()).busy === 8);
    let cl = await cluster();
    expectCountsAddUp(cl);
    expect(cl.unschedulable).toBe(0);

    const withTasks = cl.servers.find((s) => s.busy > 0 && s.free > 0) ?? cl.servers.find((s) => s.busy > 0);
    const idle = cl.servers.filter((s) => s.busy === 0 && s.free > 0 && s.id !== withTasks?.id);
    expect(withTasks).toBeDefined();
    expect(idle.length).toBeGreaterThanOrEqual(2);
    const [cordoned, drained] = idle as [Server__Output, Server__Output];
    const set = (server: string, action: string): Promise<unknown> => unary(cell.client, 'SetNodeScheduling', { server, action, reason: 'test' });
    await set(cordoned.id, 'cordon');
    await set(withTasks?.id ?? '', 'drain');
    await set(drained.id, 'drain');
    cl = await cluster();
    const state = (id: string): string => cl.servers.find((s) => s.id === id)?.state ?? '';
    expect([state(cordoned.id), state(withTasks?.id ?? ''), state(drained.id)]).toEqual(['cordoned', 'draining', 'drained']);
    // Their free RUs take no placement: unschedulable, not free.
    expect(cl.unschedulable).toBe(cordoned.free + drained.free + (withTasks?.free ?? 0));
    expectCountsAddUp(cl);
    const lines = clusterSummary(cl, false).join('\n');
    expect(lines).toContain(`${cl.unschedulable} unschedulable (free, on servers that take no new placements)`);

    for (const s of [cordoned.id, withTasks?.id ?? '', drained.id]) await set(s, 'uncordon');
    cl = await cluster();
    expect(cl.unschedulable).toBe(0);
    expectCountsAddUp(cl);
  });
});

describe('tarcil cluster: blocked, down and departed servers in every view', () => {
  const server = (id: string, state: string, rus: string, over: Partial<Server__Output> = {}): Server__Output => {
    const list = [...rus].map((c, index) => ({ index, state: c === '.' ? 'free' : c === '#' ? 'busy' : c === 'r' ? 'reserved' : 'down', job: '', task: 0 }));
    return {
      id,
      platform: id.startsWith('a') ? 'p-a' : 'p-b',
      rack: `r${id.slice(-1)}`,
      state,
      endpoint: '',
      rus: list,
      free: list.filter((r) => r.state === 'free').length,
      busy: list.filter((r) => r.state === 'busy' || r.state === 'reserved').length,
      cordoned: false,
      draining: false,
      drainDeadlineMs: 0,
      cordonReason: '',
      leftAtMs: 0,
      ...over,
    };
  };

  it('a blocked server is up, its free RUs unschedulable, and the summary says which servers are blocked and why', () => {
    const servers = [
      server('a0', 'up', '.#r.'),
      server('a1', 'blocked', '#..'),
      server('b2', 'down', '..'),
      server('b3', 'down', 'xx', { leftAtMs: 1 }),
      server('b4', 'cordoned', '.#', { cordoned: true }),
    ];
    const all = servers.flatMap((s) => s.rus);
    const cl: Cluster__Output = {
      servers,
      rus: all.length,
      free: 2,
      busy: all.filter((r) => r.state === 'busy' || r.state === 'reserved').length,
      down: all.filter((r) => r.state === 'down').length,
      unschedulable: 5,
      buckets: [],
      queuedJobs: 0,
      activeJobs: 0,
    };
    expectCountsAddUp(cl);
    const rows = tableRows(clusterSummary(cl, true), 'platform');
    expect(rows.find((r) => r['platform'] === 'p-a')).toMatchObject({ servers: '2', up: '2', down: '0', blocked: '1', free: '2', unschedulable: '2' });
    expect(rows.find((r) => r['platform'] === 'p-b')).toMatchObject({ servers: '3', up: '1', down: '2', cordoned: '1', unschedulable: '3', 'RUs down': '2' });
    expect(clusterSummary(cl, false).join('\n')).toContain(
      '1 server blocked (a1): a task there runs well below its expected rate; no new task is placed there until it recovers',
    );
  });
});
