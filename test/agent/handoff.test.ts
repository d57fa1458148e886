import { afterEach, describe, expect, it } from 'vitest';
import { FreedHandoff, HANDED_MS, OwnerKeys, TAKER_LINGER_MS } from '../../src/agent/handoff.ts';
import type { JobManager } from '../../src/agent/lifecycle.ts';
import { Metrics } from '../../src/frontend/metrics.ts';
import { ClusterState, type ServerState } from '../../src/sampling/cluster-state.ts';
import { ManualClock } from '../../src/util/clock.ts';
import { makeJob, TEST_PROFILES } from '../support/jobs.ts';
import { OwnerCell } from '../support/owner-harness.ts';
import { releaseRu } from '../../src/state/release.ts';

const server = (id: string) => ({ id, platform: 'c3-large', rack: 'r', rus: 1, speed: 1, attributes: {} });
const busy = { job: 'x', task: 0, caused: TEST_PROFILES[0]!.caused, priority: 0, state: 'busy' as const };

function twoFrontEnds(servers: number, windowMs = 250) {
  const clock = new ManualClock(0);
  const state = new ClusterState();
  const all: ServerState[] = Array.from({ length: servers }, (_, i) => state.upsertServer(server(`s${i}`)));
  const woken = { A: [] as string[], B: [] as string[] };
  const make = (self: 'A' | 'B') => {
    const h = new FreedHandoff({ state, clock, windowMs, wake: (s, i) => woken[self].push(`${s.id}/${i}`) });
    h.setSelf(self);
    const owners = new OwnerKeys();
    owners.set('job-a', 'A');
    owners.set('job-b', 'B');
    owners.setPending('job-a', true);
    owners.setPending('job-b', true);
    h.setDemand(owners);
    return h;
  };
  return { clock, state, all, woken, A: make('A'), B: make('B') };
}

describe('freed RUs among front-ends (handoff)', () => {
  it('every server has exactly one home among the front-ends with tasks to place, the same seen from each', () => {
    const { all, A, B } = twoFrontEnds(60);
    const homes = all.map((s) => [A.isHome(s), B.isHome(s)]);
    expect(homes.every(([a, b]) => a !== b)).toBe(true);
    const atA = homes.filter(([a]) => a).length;
    expect(atA).toBeGreaterThan(15);
    expect(atA).toBeLessThan(45);
  });

  it('a freed RU of a server homed elsewhere is neither woken for nor sampled until its window ends, then only if still free', () => {
    const { clock, state, all, woken, A } = twoFrontEnds(40);
    const [away1, away2] = all.filter((s) => !A.isHome(s));
    const home = all.find((s) => A.isHome(s))!;
    A.freed(home, 0);
    expect(woken.A).toEqual([`${home.id}/0`]);
    A.freed(away1!, 0);
    A.freed(away2!, 0);
    expect(woken.A).toHaveLength(1);
    expect([...(A.excluded() ?? [])]).toEqual([away1!.base, away2!.base]);
    // What a decision excludes: its own survivors and the held RUs.
    expect([...A.excludedWith([home.base])]).toEqual([home.base, away1!.base, away2!.base]);
    // Its home takes away2 within the window: nothing to wake for when it ends.
    state.setRu({ server: away2!.id, index: 0 }, busy, 5);
    clock.advance(249);
    expect(woken.A).toHaveLength(1);
    clock.advance(1);
    expect(woken.A).toEqual([`${home.id}/0`, `${away1!.id}/0`]);
    expect(A.excluded()).toBeUndefined();
    expect([...A.excludedWith([])]).toEqual([]);
    expect(A.stats).toEqual({ handedOff: 2, wokenAfterWindow: 1, takenMeanwhile: 1, namedHere: 0, namedAway: 0, secondAway: 0, takerWrites: 0 });
  });

  it('an RU its node named for a front-end is that one\'s at once, and left to it by the others for HANDED_MS', () => {
    const { clock, state, all, woken, A, B } = twoFrontEnds(40);
    // Named against the hash: a server whose home is B, freed for A.
    const bHome = all.filter((s) => !A.isHome(s));
    const [s1, s2] = bHome;
    A.freed(s1!, 0, 'A');
    B.freed(s1!, 0, 'A');
    expect(woken.A).toEqual([`${s1!.id}/0`]);
    expect(woken.B).toEqual([]);
    expect([...(B.excluded() ?? [])]).toEqual([s1!.base]);
    // A server homed at A by hash, freed with no name: the hash decides, with its short window.
    const aHome = all.find((s) => A.isHome(s))!;
    B.freed(aHome, 0);
    expect([...(B.excluded() ?? [])].sort()).toEqual([s1!.base, aHome.base].sort());
    clock.advance(250);
    // The unnamed one's window ended (still free: B wakes for it); the named one is still A's.
    expect(woken.B).toEqual([`${aHome.id}/0`]);
    expect([...(B.excluded() ?? [])]).toEqual([s1!.base]);
    state.setRu({ server: aHome.id, index: 0 }, busy, 7);
    B.freed(s2!, 0, 'A');
    clock.advance(HANDED_MS - 251);
    expect(woken.B).toHaveLength(1);
    clock.advance(1);
    // A never took s1: B may have it now. s2, named later, still waits out its own time.
    expect(woken.B).toEqual([`${aHome.id}/0`, `${s1!.id}/0`]);
    expect([...(B.excluded() ?? [])]).toEqual([s2!.base]);
    expect(B.stats).toMatchObject({ namedAway: 2, wokenAfterWindow: 2 });
    expect(A.stats).toMatchObject({ namedHere: 1 });
  });

  it('an RU its taker did not take goes next to one other front-end, the same seen from each, then to any', () => {
    const clock = new ManualClock(0);
    const state = new ClusterState();
    const all = Array.from({ length: 30 }, (_, i) => state.upsertServer(server(`s${i}`)));
    const woken: Record<string, string[]> = { A: [], B: [], C: [] };
    const owners = new OwnerKeys();
    for (const n of ['A', 'B', 'C']) {
      owners.set(`job-${n}`, n);
      owners.setPending(`job-${n}`, true);
    }
    const fe = (self: string) => {
      const h = new FreedHandoff({ state, clock, windowMs: 250, wake: (sv, i) => woken[self]!.push(`${sv.id}/${i}`) });
      h.setSelf(self);
      h.setDemand(owners);
      return h;
    };
    const [B, C] = [fe('B'), fe('C')];
    for (const sv of all) {
      B.freed(sv, 0, 'A');
      C.freed(sv, 0, 'A');
    }
    clock.advance(HANDED_MS);
    // Each RU A left went to exactly one of B and C, and both agree which.
    expect(woken.B!.length + woken.C!.length).toBe(30);
    expect(new Set([...woken.B!, ...woken.C!]).size).toBe(30);
    expect(woken.B!.length).toBeGreaterThan(5);
    expect(woken.C!.length).toBeGreaterThan(5);
    expect(B.stats.secondAway).toBe(woken.C!.length);
    // B took one of its RUs; after a second window every RU still free is anyone's.
    const [b1, c1] = [woken.B!.length, woken.C!.length];
    state.setRu({ server: woken.B![0]!.split('/')[0]!, index: 0 }, busy, 9);
    clock.advance(HANDED_MS);
    expect(woken.B!.length).toBe(b1 + c1);
    expect(woken.C!.length).toBe(c1 + b1 - 1);
    expect(B.excluded()).toBeUndefined();
    expect(C.stats.takenMeanwhile).toBe(1);
  });

  it('only front-ends with tasks to place count: one alone, or the window 0, takes every freed RU at once', () => {
    const alone = twoFrontEnds(20);
    const owners = new OwnerKeys();
    alone.A.setDemand(owners);
    owners.set('job-a', 'A');
    owners.set('job-b', 'B');
    owners.set('job-b2', 'B');
    // B owns jobs, but all their tasks are placed: it is not a member.
    expect(alone.A.memberCount()).toBe(1);
    owners.setPending('job-b', true);
    owners.setPending('job-b2', true);
    expect(alone.A.memberCount()).toBe(2);
    owners.setPending('job-b', false);
    expect(alone.A.memberCount()).toBe(2);
    owners.delete('job-b2');
    expect(alone.A.memberCount()).toBe(1);
    // A job taken over by another owner moves its demand with it.
    owners.set('job-b', 'C');
    owners.setPending('job-b', true);
    expect(alone.A.memberCount()).toBe(2);
    owners.set('job-b', 'A');
    expect(alone.A.memberCount()).toBe(1);
    owners.set('job-c', 'C');
    owners.setPending('job-c', true);
    owners.clear();
    expect(alone.A.memberCount()).toBe(1);
    for (const s of alone.all) alone.A.freed(s, 0);
    expect(alone.woken.A).toHaveLength(20);

    const off = twoFrontEnds(20, 0);
    for (const s of off.all) off.A.freed(s, 0);
    expect(off.woken.A).toHaveLength(20);
    expect(off.A.excluded()).toBeUndefined();
  });
});

describe('freed RUs among live front-ends (embedded store, manual clock)', () => {
  let cell: OwnerCell | undefined;
  afterEach(async () => {
    await cell?.close();
    cell = undefined;
  });

  /** A full one-RU cell, a job waiting on each of two front-ends, then the RU is freed. */
  async function race(handoffMs: number): Promise<{ a: JobManager; b: JobManager; placed: string[]; conflicts: number; homes: boolean[] }> {
    cell = new OwnerCell();
    await cell.seed(1, 1);
    const c = cell;
    const a = await c.owner('A', c.store, { agentConfig: { handoffMs } });
    const b = await c.owner('B', c.store, { agentConfig: { handoffMs } });
    const p = TEST_PROFILES[0]!;
    const filler = makeJob('filler', p, 1, { maxQueueMs: 0 });
    await a.submit(filler);
    await c.until(async () => (await c.busy(filler.id)).length === 1, 5000);
    const wa = makeJob('wa', p, 1, { maxQueueMs: 0 });
    const wb = makeJob('wb', p, 1, { maxQueueMs: 0 });
    await a.submit(wa);
    await b.submit(wb);
    // Both wait for a freed RU, and each front-end knows the other owns jobs.
    await c.until(() => a.view.waiters.size === 1 && b.view.waiters.size === 1, 5000);
    await c.until(() => a.view.handoff.memberCount() === 2 && b.view.handoff.memberCount() === 2, 5000);
    const before = a.agents[0]!.stats.conflicts + b.agents[0]!.stats.conflicts;
    const s = [...a.view.state.servers.values()][0]!;
    const homes = [a.view.handoff.isHome(s), b.view.handoff.isHome(b.view.state.server(s.id)!)];
    expect(await c.finishTasks(filler.id)).toBe(1);
    await c.until(async () => (await c.busy(wa.id)).length + (await c.busy(wb.id)).length === 1, 200, 10);
    const placed = [];
    if ((await c.busy(wa.id)).length) placed.push('A');
    if ((await c.busy(wb.id)).length) placed.push('B');
    return { a, b, placed, homes, conflicts: a.agents[0]!.stats.conflicts + b.agents[0]!.stats.conflicts - before };
  }

  it('the freed RU goes to the job waiting at its home front-end, with no commit conflict; /metrics counts the handoff', async () => {
    const { a, b, placed, conflicts, homes } = await race(250);
    // One home, the same seen from both.
    expect(homes[0]).toBe(!homes[1]);
    const home = homes[0] ? 'A' : 'B';
    expect(placed).toEqual([home]);
    expect(conflicts).toBe(0);
    // The other front-end held the RU back, and its window ended with the RU taken.
    await cell!.advance(300);
    const other = home === 'A' ? b : a;
    expect(other.view.handoff.stats).toMatchObject({ handedOff: 1, wokenAfterWindow: 0, takenMeanwhile: 1, namedHere: 0, namedAway: 0 });
    const text = await new Metrics({ manager: other }).registry.metrics();
    expect(text).toContain('tarcil_freed_handoffs_total{outcome="handed-off"} 1');
    expect(text).toContain('tarcil_freed_handoffs_total{outcome="taken-meanwhile"} 1');
    expect(text).toMatch(/tarcil_handoff_front_ends \d/);
  });

  it('a front-end keeps a takers key while its jobs wait; the RU its node names goes to that one, against the hash, with no conflict', async () => {
    cell = new OwnerCell();
    await cell.seed(1, 1);
    const c = cell;
    const a = await c.owner('A', c.store, { agentConfig: { handoffMs: 250 } });
    const b = await c.owner('B', c.store, { agentConfig: { handoffMs: 250 } });
    const p = TEST_PROFILES[0]!;
    const filler = makeJob('filler', p, 1, { maxQueueMs: 0 });
    await a.submit(filler);
    await c.until(async () => (await c.busy(filler.id)).length === 1, 5000);
    const takerKeys = async () => (await c.store.range(c.keys.takers())).kvs.map((kv) => [kv.key.slice(c.keys.takers().length), kv.lease]);
    expect(await takerKeys()).toEqual([]);
    const wa = makeJob('wa', p, 1, { maxQueueMs: 0 });
    const wb = makeJob('wb', p, 1, { maxQueueMs: 0 });
    await a.submit(wa);
    await b.submit(wb);
    await c.until(() => a.view.waiters.size === 1 && b.view.waiters.size === 1, 5000);
    await c.until(() => a.view.handoff.memberCount() === 2 && b.view.handoff.memberCount() === 2, 5000);
    // Each waits: each keeps its key, bound to its own lease.
    await c.until(async () => (await takerKeys()).length === 2, 1000);
    expect((await takerKeys()).sort()).toEqual([[a.leaseId, a.leaseId], [b.leaseId, b.leaseId]].sort());
    // The node names the front-end that is NOT the server's home by hash.
    const s = [...a.view.state.servers.values()][0]!;
    const [named, other] = a.view.handoff.isHome(s) ? [b, a] : [a, b];
    const before = a.agents[0]!.stats.conflicts + b.agents[0]!.stats.conflicts;
    const [f] = await c.busy(filler.id);
    const ref = c.keys.parseRu(f!.key)!;
    expect(await releaseRu(c.store, c.keys, ref, f!.rev, f!.rec, { state: 'succeeded', endedAt: c.clock.now(), exitCode: 0 }, { to: named.leaseId })).toBe(true);
    const mine = named === a ? wa : wb;
    const theirs = named === a ? wb : wa;
    await c.until(async () => (await c.busy(mine.id)).length === 1, 1000, 10);
    expect(await c.busy(theirs.id)).toEqual([]);
    expect(a.agents[0]!.stats.conflicts + b.agents[0]!.stats.conflicts - before).toBe(0);
    expect(named.view.handoff.stats.namedHere).toBe(1);
    expect(other.view.handoff.stats.namedAway).toBe(1);
    expect(await new Metrics({ manager: named }).registry.metrics()).toContain('tarcil_freed_handoffs_total{outcome="named-here"} 1');
    expect(await new Metrics({ manager: other }).registry.metrics()).toContain('tarcil_freed_handoffs_total{outcome="named-away"} 1');
    // Its job placed, the named front-end drops its key once nothing of its waited for a while; the other still waits.
    await c.advance(TAKER_LINGER_MS + 200);
    expect(await takerKeys()).toEqual([[other.leaseId, other.leaseId]]);
  });

  it('without the handoff both front-ends wake for it and one commit conflicts', async () => {
    const { placed, conflicts } = await race(0);
    expect(placed).toHaveLength(1);
    expect(conflicts).toBeGreaterThanOrEqual(1);
  });
});
