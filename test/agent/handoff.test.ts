import { afterEach, describe, expect, it } from 'vitest';
import { CAME_HOME_WAKES, FreedHandoff, HOME_TICK_MS, HOME_TURN_MS, MemberDemand } from '../../src/agent/handoff.ts';
import type { JobManager } from '../../src/owner/manager.ts';
import { Metrics } from '../../src/frontend/metrics.ts';
import { RuIndex, type ServerState } from '../../src/sampling/ru-index.ts';
import { ManualClock } from '../../src/util/clock.ts';
import { SeededRng } from '../../src/util/rng.ts';
import { AdmissionCounters } from '../../src/admission/index.ts';
import { decide, DEFAULT_CORE_CONFIG, type CoreContext } from '../../src/agent/core.ts';
import { jobTarget } from '../../src/quality/index.ts';
import { makeJob, TEST_PROFILES } from '../support/jobs.ts';
import { OwnerCell } from '../support/owner-harness.ts';

const server = (id: string) => ({ id, platform: 'c3-large', rack: 'r', rus: 1, speed: 1, attributes: {} });
const busy = { job: 'x', task: 0, caused: TEST_PROFILES[0]!.caused, priority: 0, state: 'busy' as const };

function twoFrontEnds(servers: number, windowMs = 250, partitionBelow = 0) {
  const clock = new ManualClock(0);
  const state = new RuIndex();
  const all: ServerState[] = Array.from({ length: servers }, (_, i) => state.upsertServer(server(`s${i}`)));
  const woken = { A: [] as string[], B: [] as string[] };
  const make = (self: 'A' | 'B') => {
    const h = new FreedHandoff({ state, clock, windowMs, partitionBelow, wake: (s, i) => woken[self].push(`${s.id}/${i}`) });
    h.setSelf(self);
    const members = new MemberDemand();
    members.set('A', true);
    members.set('B', true);
    h.setDemand(members);
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
    expect(A.stats).toEqual({ handedOff: 2, wokenAfterWindow: 1, takenMeanwhile: 1, leftToHome: 0, cameHome: 0 });
  });

  it("the window covers the freed RU's server: its other free RUs go to its home too, and only the freed one is woken for after", () => {
    const clock = new ManualClock(0);
    const state = new RuIndex();
    const all = Array.from({ length: 20 }, (_, i) => state.upsertServer({ ...server(`s${i}`), rus: 4 }));
    const woken: string[] = [];
    const h = new FreedHandoff({ state, clock, windowMs: 250, wake: (s, i) => woken.push(`${s.id}/${i}`) });
    h.setSelf('A');
    const members = new MemberDemand();
    members.set('A', true);
    members.set('B', true);
    h.setDemand(members);
    const away = all.find((s) => !h.isHome(s))!;
    // RUs 0 and 1 busy, 2 and 3 free; then RU 1's task ends.
    state.setRu({ server: away.id, index: 0 }, busy, 1);
    state.setRu({ server: away.id, index: 1 }, busy, 2);
    state.setRu({ server: away.id, index: 1 }, null, 3);
    h.freed(away, 1);
    expect([...(h.excluded() ?? [])].sort((a, b) => a - b)).toEqual([away.base + 1, away.base + 2, away.base + 3]);
    clock.advance(250);
    expect(woken).toEqual([`${away.id}/1`]);
    expect(h.excluded()).toBeUndefined();
  });

  it('only front-ends with tasks to place count: one alone, or the window 0, takes every freed RU at once', () => {
    const alone = twoFrontEnds(20);
    const members = new MemberDemand();
    alone.A.setDemand(members);
    // B is a member whose record says it has nothing to place: it does not count.
    members.set('A', false);
    members.set('B', false);
    expect(alone.A.memberCount()).toBe(1);
    members.set('B', true);
    members.set('C', true);
    expect(alone.A.memberCount()).toBe(3);
    members.set('B', false);
    expect(alone.A.memberCount()).toBe(2);
    // This front-end counts whatever its own record says.
    members.set('A', true);
    expect(alone.A.memberCount()).toBe(2);
    members.clear();
    expect(alone.A.memberCount()).toBe(1);
    for (const s of alone.all) alone.A.freed(s, 0);
    expect(alone.woken.A).toHaveLength(20);

    const off = twoFrontEnds(20, 0);
    for (const s of off.all) off.A.freed(s, 0);
    expect(off.woken.A).toHaveLength(20);
    expect(off.A.excluded()).toBeUndefined();
  });
});

describe('the sampling split among front-ends on a nearly full cell (partitionBelow)', () => {
  /** 100 one-RU servers, all busy but `free` of them. */
  function nearlyFull(free: number, partitionBelow = 0.05) {
    const cell = twoFrontEnds(100, 250, partitionBelow);
    cell.all.forEach((s, i) => {
      if (i >= free) cell.state.setRu({ server: s.id, index: 0 }, busy, i + 1);
    });
    return cell;
  }

  it('below the share, each server may be sampled by at most one front-end, its home, and by none in its quiet tick; above it, or alone, by every one', () => {
    const { all, A, B, state } = nearlyFull(4);
    const a = A.partition();
    const b = B.partition();
    expect(a && b).toBeTruthy();
    expect(all.every((s) => !(a!(s) && b!(s)))).toBe(true);
    expect(all.every((s) => a!(s) === A.isHome(s) && b!(s) === B.isHome(s))).toBe(true);
    // About a quarter of the servers are in their quiet tick: sampled by nobody.
    const quiet = all.filter((s) => !a!(s) && !b!(s)).length;
    expect(quiet).toBeGreaterThan(10);
    expect(quiet).toBeLessThan(40);
    // Five free of 100 is not below 5%.
    state.setRu({ server: all[50]!.id, index: 0 }, null, 500);
    expect(A.partition()).toBeUndefined();
    // Not split: every server has exactly one home, quiet tick or not.
    expect(all.every((s) => A.isHome(s) !== B.isHome(s))).toBe(true);
    // The split needs the share set, the handoff on, and another front-end with tasks to place.
    expect(nearlyFull(4, 0).A.partition()).toBeUndefined();
    const alone = nearlyFull(4);
    alone.A.setDemand(new MemberDemand());
    expect(alone.A.partition()).toBeUndefined();
  });

  it('each server changes home once every 2 s, a quarter of them at each 500-ms tick after a quiet tick, and its free RUs wake a waiter at the new home', () => {
    const { clock, all, A, B, woken } = nearlyFull(4);
    const free = all.slice(0, 4);
    const sampler = (s: ServerState): string => (A.partition()!(s) ? 'A' : B.partition()!(s) ? 'B' : '-');
    const seen: string[][] = [all.map(sampler)];
    const cameHome: string[][] = [];
    for (let t = 1; t <= 8; t++) {
      const before = woken.A.length + woken.B.length;
      clock.advance(HOME_TICK_MS);
      seen.push(all.map(sampler));
      cameHome.push([...woken.A, ...woken.B].slice(before));
    }
    for (let t = 1; t <= 8; t++) {
      const [prev, now] = [seen[t - 1]!, seen[t]!];
      // Quiet then active again, always at the other front-end: a quarter or so at each tick.
      const moved = all.filter((_, i) => prev[i] === '-' && now[i] !== '-');
      expect(moved.length).toBeGreaterThan(10);
      expect(moved.length).toBeLessThan(40);
      all.forEach((_, i) => {
        if (prev[i] !== '-' && now[i] !== '-') expect(now[i]).toBe(prev[i]);
      });
      // The free RUs whose server came home at this tick, each woken for once, at its new home.
      expect(cameHome[t - 1]!.sort()).toEqual(
        free
          .filter((s) => moved.includes(s))
          .map((s) => `${s.id}/0`)
          .sort(),
      );
    }
    // Over one tenure (four ticks) every server was quiet once, and sampled by at most two front-ends (before and after its move).
    for (const [i] of all.entries()) {
      const col = seen.slice(0, 4).map((row) => row[i]);
      expect(col.filter((x) => x === '-')).toHaveLength(1);
      const active = col.filter((x) => x !== '-');
      expect(new Set(active).size).toBeLessThanOrEqual(2);
    }
    expect(A.stats.cameHome + B.stats.cameHome).toBe(cameHome.flat().length);
  });

  it('a tick wakes at most CAME_HOME_WAKES waiters for the free RUs that came home, and none while nothing waits', () => {
    // 2,000 one-RU servers, 600 free, split below half: about 75 free RUs come home at each tick.
    const clock = new ManualClock(0);
    const state = new RuIndex();
    const all = Array.from({ length: 2000 }, (_, i) => state.upsertServer(server(`s${i}`)));
    all.forEach((s, i) => {
      if (i >= 600) state.setRu({ server: s.id, index: 0 }, busy, i + 1);
    });
    let waiting = 1000;
    const woken: string[] = [];
    const h = new FreedHandoff({
      state,
      clock,
      windowMs: 250,
      partitionBelow: 0.5,
      waiting: () => waiting,
      wake: (s, i) => (waiting--, woken.push(`${s.id}/${i}`)),
    });
    h.setSelf('A');
    const members = new MemberDemand();
    members.set('A', true);
    members.set('B', true);
    h.setDemand(members);
    const perTick: number[] = [];
    for (let t = 0; t < 8; t++) {
      const before = woken.length;
      expect(h.partition()).toBeDefined();
      clock.advance(HOME_TICK_MS);
      perTick.push(woken.length - before);
    }
    // Capped, and the cap is what bound it: unbounded, some ticks would have woken more.
    expect(Math.max(...perTick)).toBe(CAME_HOME_WAKES);
    expect(new Set(woken).size).toBe(woken.length);
    // Three waiters left: three wakes, then none.
    waiting = 3;
    const before = woken.length;
    clock.advance(HOME_TICK_MS);
    clock.advance(HOME_TICK_MS);
    expect(woken.length - before).toBe(3);
    expect(h.stats.cameHome).toBe(woken.length);
  });

  it('says whether a server changed home between two times: not within its tenure, always across one', () => {
    const { all, A } = nearlyFull(4);
    for (const s of all.slice(0, 20)) {
      expect(A.homeMoved(s, 0, HOME_TURN_MS * 3)).toBe(true);
      expect(A.homeMoved(s, 1000, 1000)).toBe(false);
      // Within 2 s, a server moves at most once: of the four 500-ms steps, exactly one crosses its move.
      const steps = [0, 1, 2, 3].map((k) => A.homeMoved(s, k * HOME_TICK_MS, (k + 1) * HOME_TICK_MS));
      expect(steps.filter(Boolean)).toHaveLength(1);
    }
  });

  it('a freed RU still free when its window ends is left to its home while the split holds, and woken for once it does not', () => {
    const { clock, all, A, woken, state } = nearlyFull(0);
    const away = all.find((s) => !A.isHome(s))!;
    state.setRu({ server: away.id, index: 0 }, null, 500);
    expect(A.partition()).toBeDefined();
    A.freed(away, 0);
    clock.advance(250);
    expect(woken.A).toEqual([]);
    expect(A.stats).toMatchObject({ handedOff: 1, leftToHome: 1, wokenAfterWindow: 0 });
    // Plenty free now: no split, and the same RU freed again is woken for after its window.
    for (const s of all.slice(0, 10)) state.setRu({ server: s.id, index: 0 }, null, 600);
    const away2 = all.find((s) => !A.isHome(s))!;
    A.freed(away2, 0);
    clock.advance(250);
    expect(woken.A).toEqual([`${away2.id}/0`]);
  });

  it('a decision draws only from the servers allowed', () => {
    const { all, A, state } = nearlyFull(4);
    const allow = A.partition()!;
    const job = makeJob('j', TEST_PROFILES[1]!, 4);
    const clock = new ManualClock(0);
    const core: CoreContext = { state, admission: new AdmissionCounters({ clock, seed: 5 }), rng: new SeededRng(3), clock };
    const d = decide(core, { job, target: jobTarget(job.profile.caused), m: 4, cfg: DEFAULT_CORE_CONFIG, skipAdmission: true, allow });
    // Of the four free RUs some are homed at the other front-end: fewer picks than asked.
    const homeFree = all.slice(0, 4).filter((s) => allow(s)).length;
    expect(homeFree).toBeGreaterThan(0);
    expect(homeFree).toBeLessThan(4);
    expect(d.selection.picks.length).toBe(homeFree);
    expect(d.selection.picks.every((p) => allow(p.server))).toBe(true);
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
    await a.accept(filler);
    await c.until(async () => (await c.busy(filler.id)).length === 1, 5000);
    const wa = makeJob('wa', p, 1, { maxQueueMs: 0 });
    const wb = makeJob('wb', p, 1, { maxQueueMs: 0 });
    await a.accept(wa);
    await b.accept(wb);
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
    expect(other.view.handoff.stats).toEqual({ handedOff: 1, wokenAfterWindow: 0, takenMeanwhile: 1, leftToHome: 0, cameHome: 0 });
    const text = await new Metrics({ manager: other }).registry.metrics();
    expect(text).toContain('tarcil_freed_handoffs_total{outcome="handed-off"} 1');
    expect(text).toContain('tarcil_freed_handoffs_total{outcome="taken-meanwhile"} 1');
    expect(text).toMatch(/tarcil_handoff_front_ends \d/);
  });

  it('without the handoff both front-ends wake for it and one commit conflicts', async () => {
    const { placed, conflicts } = await race(0);
    expect(placed).toHaveLength(1);
    expect(conflicts).toBeGreaterThanOrEqual(1);
  });
});
