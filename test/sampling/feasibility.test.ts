import { describe, expect, it } from 'vitest';
import type { ServerSpec } from '../../src/model/types.ts';
import { RuIndex } from '../../src/sampling/ru-index.ts';
import { eligibleCapacity, eligibleGroups, feasibility, serverMatches, type FeasibilityJob } from '../../src/sampling/feasibility.ts';

/** n servers of `rus` RUs, `perRack` to a rack, all with zone=demo-a; odd ones have ssd=yes. */
function cell(n: number, rus: number, perRack: number, platform = (i: number) => (i % 2 === 0 ? 'r3.2xlarge' : 'c3.large')): RuIndex {
  const st = new RuIndex();
  for (let i = 0; i < n; i++) {
    const spec: ServerSpec = {
      id: `s${i}`,
      platform: platform(i),
      rack: `r${Math.floor(i / perRack)}`,
      rus,
      speed: 1,
      attributes: i % 2 === 1 ? { zone: 'demo-a', ssd: 'yes' } : { zone: 'demo-a' },
    };
    st.upsertServer(spec);
  }
  return st;
}

function job(over: Partial<FeasibilityJob> = {}): FeasibilityJob {
  return { tasks: 4, mode: 'incremental', locality: { mode: 'any', scope: 'server' }, constraints: {}, ...over };
}

describe('serverMatches', () => {
  const s: ServerSpec = { id: 'x', platform: 'p1', rack: 'r', rus: 1, speed: 1, attributes: { zone: 'a', ssd: 'yes' } };
  it('checks platforms and every attribute exactly', () => {
    expect(serverMatches(s, {})).toBe(true);
    expect(serverMatches(s, { platforms: ['p0', 'p1'] })).toBe(true);
    expect(serverMatches(s, { platforms: ['p0'] })).toBe(false);
    expect(serverMatches(s, { attributes: { zone: 'a' } })).toBe(true);
    expect(serverMatches(s, { attributes: { zone: 'a', ssd: 'no' } })).toBe(false);
    expect(serverMatches(s, { attributes: { gpu: 'yes' } })).toBe(false);
    expect(serverMatches(s, { platforms: ['p1'], attributes: { ssd: 'yes' }, dataServers: ['y'] })).toBe(true);
  });
});

describe('feasibility', () => {
  it('a job that fits: ok, and ok on what is up', () => {
    const st = cell(3, 8, 2);
    const v = feasibility(st, job({ tasks: 3, mode: 'gang', locality: { mode: 'spread', scope: 'server' } }));
    expect(v).toMatchObject({ ok: true, upOk: true });
    expect(v.eligible).toEqual({
      cellServers: 3,
      cell: { servers: 3, racks: 2, rus: 24, serverRus: 8, rackRus: 16 },
      up: { servers: 3, racks: 2, rus: 24, serverRus: 8, rackRus: 16 },
    });
  });

  it('no server matches the constraints: names the constraint and the values the cell has', () => {
    const st = cell(3, 8, 3);
    const v = feasibility(st, job({ constraints: { attributes: { zone: 'nowhere' } } }));
    expect(v.ok).toBe(false);
    if (v.ok) return;
    expect(v.field).toBe('constraints');
    expect(v.reason).toBe('no server has zone=nowhere (zone values in the cell: demo-a)');
    expect(v.upOk).toBe(false);

    const p = feasibility(st, job({ constraints: { platforms: ['m4.xlarge'], attributes: { ssd: 'yes' } } }));
    expect(p).toMatchObject({ ok: false, field: 'constraints' });
    if (!p.ok) {
      expect(p.reason).toBe('no server has platform m4.xlarge and ssd=yes (platforms in the cell: c3.large, r3.2xlarge; ssd values in the cell: yes)');
    }
    // Each constraint alone matches something, together nothing.
    const both = feasibility(st, job({ constraints: { platforms: ['r3.2xlarge'], attributes: { ssd: 'yes' } } }));
    expect(both.ok).toBe(false);

    expect(feasibility(new RuIndex(), job())).toMatchObject({ ok: false, field: 'constraints', reason: 'the cell has no servers' });
  });

  it('a gang larger than the eligible RUs', () => {
    const st = cell(3, 8, 3);
    const v = feasibility(st, job({ tasks: 25, mode: 'gang' }));
    expect(v).toMatchObject({ ok: false, field: 'tasks', reason: 'a gang of 25 tasks needs 25 RUs at once; the cell has 24 eligible' });
    expect(feasibility(st, job({ tasks: 24, mode: 'gang' })).ok).toBe(true);
    // Incremental jobs may be larger than the cell: they run in waves.
    expect(feasibility(st, job({ tasks: 25 })).ok).toBe(true);
    // Constraints narrow the RUs: ssd=yes is one server of 8 RUs.
    expect(feasibility(st, job({ tasks: 9, mode: 'gang', constraints: { attributes: { ssd: 'yes' } } }))).toMatchObject({
      ok: false,
      reason: 'a gang of 9 tasks needs 9 RUs at once; the cell has 8 eligible',
    });
  });

  it('a required spread with more tasks than eligible servers or racks', () => {
    const st = cell(4, 8, 2); // racks r0, r1
    expect(feasibility(st, job({ tasks: 3, locality: { mode: 'spread', scope: 'rack' } }))).toMatchObject({
      ok: false,
      field: 'locality',
      reason: 'spread over racks needs 3 distinct racks; the cell has 2 eligible',
    });
    expect(feasibility(st, job({ tasks: 5, locality: { mode: 'spread', scope: 'server', required: true } }))).toMatchObject({
      ok: false,
      field: 'locality',
      reason: 'spread over servers needs 5 distinct servers; the cell has 4 eligible',
    });
    // A preference never makes a job impossible.
    expect(feasibility(st, job({ tasks: 5, locality: { mode: 'spread', scope: 'server', required: false } })).ok).toBe(true);
    expect(feasibility(st, job({ tasks: 2, locality: { mode: 'spread', scope: 'rack' } })).ok).toBe(true);
    // Eligible servers only: ssd=yes on s1, s3.
    expect(feasibility(st, job({ tasks: 3, locality: { mode: 'spread', scope: 'server' }, constraints: { attributes: { ssd: 'yes' } } }))).toMatchObject({
      ok: false,
      reason: 'spread over servers needs 3 distinct servers; the cell has 2 eligible',
    });
  });

  it('counts down servers in the cell, and tells what is up apart (a blocked server is up: it takes a task when nothing else can)', () => {
    const st = cell(4, 8, 1); // four racks of one server
    st.setServerDown('s0', true);
    st.setServerDown('s1', true);
    st.setBlocked('s3', true);
    st.setRu({ server: 's2', index: 0 }, null, 1, true); // one RU down
    const e = eligibleGroups(st, {});
    expect(e.cell).toEqual({ servers: 4, racks: 4, rus: 32, serverRus: 8, rackRus: 8 });
    expect(e.up).toEqual({ servers: 2, racks: 2, rus: 15, serverRus: 8, rackRus: 8 });

    const spread = feasibility(st, job({ tasks: 3, locality: { mode: 'spread', scope: 'rack' } }));
    expect(spread.ok).toBe(true);
    expect(spread.upOk).toBe(false);
    expect(spread.upField).toBe('locality');
    expect(spread.upReason).toBe(
      'spread over racks needs 3 distinct racks; the servers up now have 2 eligible (the cell has 4 counting servers that are down)',
    );

    const gang = feasibility(st, job({ tasks: 20, mode: 'gang' }));
    expect(gang).toMatchObject({ ok: true, upOk: false, upField: 'tasks' });
    expect(gang.upReason).toContain('the servers up now have 15 eligible');

    const none = feasibility(st, job({ constraints: { platforms: ['r3.2xlarge'] }, tasks: 1 }));
    // r3.2xlarge: s0 (down) and s2 (up): fine.
    expect(none).toMatchObject({ ok: true, upOk: true });
    st.setServerDown('s2', true);
    const down = feasibility(st, job({ constraints: { platforms: ['r3.2xlarge'] }, tasks: 1 }));
    expect(down).toMatchObject({ ok: true, upOk: false, upField: 'constraints' });
    expect(down.upReason).toBe('no server matching the constraints is up now (2 eligible are down)');
    // Busy RUs are still part of the cell and of what is up.
    st.setServerDown('s2', false);
    for (let i = 0; i < 8; i++) st.setRu({ server: 's3', index: i }, { job: 'x', task: i, caused: [], priority: 1, state: 'busy' }, 2);
    expect(eligibleGroups(st, {}).up.rus).toBe(15);
  });
});

describe('eligibleCapacity', () => {
  /** What eligibleCapacity must say: a count over every server up and not cordoned that matches. */
  const counted = (st: RuIndex, c: FeasibilityJob['constraints']): number =>
    [...st.servers.values()].filter((s) => !s.down && !s.cordoned && serverMatches(s.spec, c)).reduce((n, s) => n + s.ruCount, 0);
  const asks: FeasibilityJob['constraints'][] = [
    {},
    { platforms: ['c3.large'] },
    { attributes: { ssd: 'yes' } },
    { attributes: { ssd: 'yes', zone: 'demo-a' } },
    { attributes: { zone: 'demo-a', ssd: 'yes' } },
    { platforms: ['r3.2xlarge'], attributes: { ssd: 'yes' } },
    { platforms: [] },
  ];
  const check = (st: RuIndex): void => {
    for (const c of asks) expect(eligibleCapacity(st, c), JSON.stringify(c)).toBe(counted(st, c));
  };

  it('follows every change of the servers a placement may use, asked between each', () => {
    const st = cell(6, 4, 2);
    check(st);
    expect(eligibleCapacity(st, {})).toBe(24);
    st.setServerDown('s1', true);
    check(st);
    expect(eligibleCapacity(st, { attributes: { ssd: 'yes' } })).toBe(8);
    st.setCordoned('s3', true);
    check(st);
    st.setCordoned('s9', true); // not registered yet: cordoned when it comes
    st.upsertServer({ id: 's9', platform: 'c3.large', rack: 'r9', rus: 8, speed: 1, attributes: { ssd: 'yes' } });
    check(st);
    st.setCordoned('s9', false);
    check(st);
    expect(eligibleCapacity(st, { platforms: ['c3.large'] })).toBe(4 + 8);
    st.removeServer('s5');
    check(st);
    st.setServerDown('s1', false);
    st.setCordoned('s3', false);
    check(st);
    // Re-registered with another size: replaced.
    st.upsertServer({ id: 's0', platform: 'r3.2xlarge', rack: 'r0', rus: 16, speed: 1, attributes: { zone: 'demo-a' } });
    check(st);
    expect(eligibleCapacity(st, {})).toBe(16 + 4 * 4 + 8);
  });

  it('is the same whatever else changes on the servers (tasks come and go)', () => {
    const st = cell(4, 4, 2);
    const before = eligibleCapacity(st, {});
    st.setRu({ server: 's0', index: 0 }, { job: 'j', task: 0, caused: [1, 2, 3], priority: 0, state: 'busy' }, 1);
    expect(eligibleCapacity(st, {})).toBe(before);
    check(st);
  });
});

describe('attribute names that are members of Object.prototype', () => {
  it('are absent unless a server has them as its own attribute', () => {
    const s: ServerSpec = { id: 'x', platform: 'p1', rack: 'r', rus: 1, speed: 1, attributes: { zone: 'a' } };
    for (const k of ['constructor', 'toString', 'hasOwnProperty', '__proto__']) {
      // As a job record read back from the store holds them: own keys of a parsed JSON object.
      const attrs = JSON.parse(`{${JSON.stringify(k)}:"x"}`) as Record<string, string>;
      expect(serverMatches(s, { attributes: attrs })).toBe(false);
    }
    const odd: ServerSpec = { ...s, attributes: JSON.parse('{"constructor":"x","__proto__":"y"}') as Record<string, string> };
    expect(serverMatches(odd, { attributes: { constructor: 'x' } })).toBe(true);
    expect(serverMatches(odd, { attributes: JSON.parse('{"__proto__":"y"}') as Record<string, string> })).toBe(true);
    expect(serverMatches(odd, { attributes: JSON.parse('{"__proto__":"z"}') as Record<string, string> })).toBe(false);
  });

  it('a job that asks for them is refused naming no value the cell does not have', () => {
    const st = cell(3, 8, 3);
    const v = feasibility(
      st,
      job({ constraints: { attributes: JSON.parse('{"constructor":"x","toString":"y","__proto__":"nowhere"}') as Record<string, string> } }),
    );
    expect(v).toMatchObject({
      ok: false,
      field: 'constraints',
      reason:
        'no server has constructor=x and toString=y and __proto__=nowhere (constructor values in the cell: none; toString values in the cell: none; __proto__ values in the cell: none)',
    });
  });
});
