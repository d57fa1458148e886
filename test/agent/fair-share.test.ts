import { describe, expect, it } from 'vitest';
import { FairShare } from '../../src/agent/fair-share.ts';
import { FreedWaiters, type WaitClass } from '../../src/agent/freed-waiters.ts';
import { RuIndex, type Occupant, type ServerState } from '../../src/sampling/ru-index.ts';
import { jobTarget } from '../../src/quality/index.ts';
import { SeededRng } from '../../src/util/rng.ts';
import { selectPlacements } from '../../src/sampling/batch.ts';
import { agentConfig } from '../../src/agent/config.ts';
import { SharedView } from '../../src/agent/shared-view.ts';
import { Keys } from '../../src/state/keys.ts';
import { MemoryStore } from '../../src/store/index.ts';
import { putNamespace } from '../../src/tenancy/namespaces.ts';
import { SystemClock } from '../../src/util/clock.ts';
import { createLogger } from '../../src/util/log.ts';

const CAUSED = [1, 1, 1, 1, 1, 1, 1, 1, 1, 1];

function occ(job: string, task: number, priority = 10): Occupant {
  return { job, task, caused: CAUSED, priority, state: 'busy' };
}

/** A cell of `n` servers of 4 RUs; `held[ns]` RUs busy with tasks of a job of that namespace, in order. */
function cell(n: number, held: Record<string, number>, priority = 10): { state: RuIndex; servers: ServerState[] } {
  const state = new RuIndex();
  const servers: ServerState[] = [];
  for (let i = 0; i < n; i++) servers.push(state.upsertServer({ id: `s${i}`, platform: 'p', rack: 'r0', rus: 4, speed: 1, attributes: {} }));
  let ru = 0;
  let rev = 1;
  for (const [ns, count] of Object.entries(held)) {
    for (let k = 0; k < count; k++, ru++) {
      const s = servers[Math.floor(ru / 4)] as ServerState;
      state.setRu({ server: s.id, index: ru % 4 }, occ(ns === 'default' ? 'j-1' : `${ns}/j-1`, k, priority), rev++);
    }
  }
  return { state, servers };
}

function fairOver(state: RuIndex): FairShare {
  return new FairShare({ held: (ns) => state.namespaceRus(ns), holding: () => state.namespacesHolding().keys(), totalRus: () => state.totalRus });
}

const ANY: WaitClass = { key: 'any', canUse: () => true };

/** Adds waiters (namespace, priority) in this arrival order; returns the order in which freed RUs wake them. */
function wakeOrder(w: FreedWaiters, server: ServerState, waiters: [string, number][], frees = waiters.length): string[] {
  const woken: string[] = [];
  waiters.forEach(([ns, priority], i) => {
    w.add(ANY, { namespace: ns, priority, seq: w.nextSeq(), wake: () => woken.push(`${ns}#${i}`) });
  });
  for (let k = 0; k < frees; k++) w.freed(server, 0);
  return woken;
}

describe('fair share among namespaces', () => {
  it('usage is RUs held over weight, counted per namespace from the view (claims included)', () => {
    const { state, servers } = cell(4, { a: 6, b: 2, default: 1 });
    const fair = fairOver(state);
    fair.setWeights([{ name: 'a', weight: 3 }]);
    expect(state.namespaceRus('a')).toBe(6);
    expect(fair.usage('a')).toBe(2);
    expect(fair.usage('b')).toBe(2);
    expect(fair.usage('default')).toBe(1);
    expect(fair.usage('c')).toBe(0);
    // A claim (a placement in flight) counts as held; releasing an RU uncounts it.
    state.claim({ server: (servers[3] as ServerState).id, index: 0 }, occ('b/j-2', 0));
    expect(state.namespaceRus('b')).toBe(3);
    state.setRu({ server: 's0', index: 0 }, null, 100);
    expect(state.namespaceRus('a')).toBe(5);
  });

  it('a freed RU goes to the namespace with the lowest held / weight, then priority, then arrival', () => {
    // a holds 8 RUs (weight 1), b holds 4 (weight 1), c holds 6 with weight 3 (usage 2).
    const { state, servers } = cell(6, { a: 8, b: 4, c: 6 });
    const fair = fairOver(state);
    fair.setWeights([{ name: 'c', weight: 3 }]);
    const w = new FreedWaiters(fair);
    // Arrival order a (prio 10), a (prio 20), b, c, c (prio 20): c first (usage 2), its prio 20
    // first; then b (4); then a, prio 20 before prio 10. Usage does not change here (no RU taken).
    expect(
      wakeOrder(w, servers[5] as ServerState, [
        ['a', 10],
        ['a', 20],
        ['b', 10],
        ['c', 10],
        ['c', 20],
      ]),
    ).toEqual(['c#4', 'c#3', 'b#2', 'a#1', 'a#0']);
  });

  it('the order follows usage as it changes: the namespace served takes the RU and may lose its turn', () => {
    const { state, servers } = cell(4, { a: 3, b: 2 });
    const fair = fairOver(state);
    const w = new FreedWaiters(fair);
    const woken: string[] = [];
    let free = 8;
    const take = (ns: string) => () => {
      woken.push(ns);
      // The woken call takes one RU (held by its namespace from now on).
      const ru = free++;
      const s = servers[Math.floor(ru / 4)] as ServerState;
      state.setRu({ server: s.id, index: ru % 4 }, occ(`${ns}/j-9`, ru), 1000 + ru);
    };
    for (let i = 0; i < 3; i++) w.add(ANY, { namespace: 'a', priority: 10, seq: w.nextSeq(), wake: take('a') });
    for (let i = 0; i < 3; i++) w.add(ANY, { namespace: 'b', priority: 10, seq: w.nextSeq(), wake: take('b') });
    for (let k = 0; k < 6; k++) w.freed(servers[0] as ServerState, 0);
    // b (2) < a (3): b; then 3 = 3, a tie broken by arrival: a; then b (3 < 4); a (4 = 4, earlier); b; a.
    expect(woken).toEqual(['b', 'a', 'b', 'a', 'b', 'a']);
    expect(w.size).toBe(0);
  });

  it('without fair share, or with one namespace, the order is priority then arrival (as before)', () => {
    const { state, servers } = cell(4, { a: 8 });
    const off = new FreedWaiters();
    expect(
      wakeOrder(off, servers[3] as ServerState, [
        ['a', 10],
        ['b', 10],
        ['a', 20],
      ]),
    ).toEqual(['a#2', 'a#0', 'b#1']);
    const one = new FreedWaiters(fairOver(state));
    expect(
      wakeOrder(one, servers[3] as ServerState, [
        ['default', 10],
        ['default', 30],
        ['default', 10],
      ]),
    ).toEqual(['default#1', 'default#0', 'default#2']);
  });

  it('waiting needs are counted per namespace and let go with the waiter', () => {
    const { state, servers } = cell(2, {});
    const w = new FreedWaiters(fairOver(state));
    const offA = w.add(ANY, { namespace: 'a', need: 5, priority: 10, seq: w.nextSeq(), wake: () => {} });
    w.add(ANY, { namespace: 'b', need: 2, priority: 10, seq: w.nextSeq(), wake: () => {} });
    expect(new Map(w.waitingNeeds)).toEqual(
      new Map([
        ['a', 5],
        ['b', 2],
      ]),
    );
    offA();
    expect(new Map(w.waitingNeeds)).toEqual(new Map([['b', 2]]));
    w.freed(servers[0] as ServerState, 0);
    expect(w.waitingNeeds.size).toBe(0);
  });

  it('a request yields only to namespaces with lower usage that wait for more than is free', () => {
    const { state } = cell(4, { a: 10, b: 2 });
    const fair = fairOver(state);
    const waiting = new Map([['b', 3]]);
    expect(fair.mustYield('a', 1, 0, waiting)).toBe(true);
    // Enough free RUs for b's waiting work and this request: no need to hold back.
    expect(fair.mustYield('a', 1, 4, waiting)).toBe(false);
    expect(fair.mustYield('a', 1, 3, waiting)).toBe(true);
    // b never yields to a (higher usage), nor to itself.
    expect(
      fair.mustYield(
        'b',
        1,
        0,
        new Map([
          ['a', 50],
          ['b', 3],
        ]),
      ),
    ).toBe(false);
    // A heavier weight lowers a's usage below b's: then b yields to a.
    fair.setWeights([{ name: 'a', weight: 10 }]);
    expect(fair.mustYield('b', 1, 0, new Map([['a', 5]]))).toBe(true);
  });

  it('preemption across namespaces goes only from below its share to above its own', () => {
    // 16 RUs: a holds 12, b holds 2; a and b have work, so each is guaranteed 8.
    const { state } = cell(4, { a: 12, b: 2 });
    const fair = fairOver(state);
    const forB = fair.mayDisplace('b', ['a']);
    expect(forB('a/j-1')).toBe(true);
    expect(forB('b/j-7')).toBe(true);
    const forA = fair.mayDisplace('a', ['b']);
    expect(forA('b/j-1')).toBe(false);
    expect(forA('a/j-3')).toBe(true);
    // c (no RUs, waiting) joins: shares 16/3 each; b (2) is below, a (12) above; c may not take b's.
    const forC = fair.mayDisplace('c', ['a', 'b']);
    expect(forC('a/j-1')).toBe(true);
    expect(forC('b/j-1')).toBe(false);
  });

  it('the selection preempts no task of a namespace below its share for one above it, and may the reverse', () => {
    // Full cell of low-priority tasks: b holds 4 of 16 RUs (below its share of 8), a 12 (above).
    const state = new RuIndex();
    for (let i = 0; i < 4; i++) state.upsertServer({ id: `s${i}`, platform: 'p', rack: 'r0', rus: 4, speed: 1, attributes: {} });
    let rev = 1;
    for (let ru = 0; ru < 16; ru++) state.setRu({ server: `s${Math.floor(ru / 4)}`, index: ru % 4 }, occ(ru < 4 ? 'b/j-low' : 'a/j-low', ru, 1), rev++);
    const fair = fairOver(state);
    const target = jobTarget(CAUSED);
    const req = (jobId: string, m: number, mayDisplace?: (v: string) => boolean) => ({
      jobId,
      target,
      caused: CAUSED,
      priority: 200,
      platformPerf: {},
      locality: { mode: 'any' as const, scope: 'server' as const },
      constraints: {},
      m,
      R: 16,
      preempt: true,
      ...(mayDisplace ? { mayDisplace } : {}),
    });
    const victims = (picks: { victim?: Occupant }[]) => picks.map((p) => p.victim?.job.split('/')[0]);
    // 14 RUs wanted, 12 of a's own: without the rule a's high-priority job also takes b's.
    const free = selectPlacements(state, req('a/j-hi', 14), new SeededRng(1));
    expect(free.picks.length).toBe(14);
    expect(victims(free.picks).filter((ns) => ns === 'b').length).toBeGreaterThanOrEqual(2);
    // With it, a (above its share) takes only its own namespace's tasks, none of b's.
    const ruled = selectPlacements(state, req('a/j-hi', 14, fair.mayDisplace('a', ['b'])), new SeededRng(1));
    expect(ruled.picks.length).toBe(12);
    expect(victims(ruled.picks).every((ns) => ns === 'a')).toBe(true);
    // b (below its share) may take a's (above its own), and its own.
    const forB = selectPlacements(state, req('b/j-hi', 14, fair.mayDisplace('b', ['a'])), new SeededRng(1));
    expect(forB.picks.length).toBe(14);
    expect(victims(forB.picks).filter((ns) => ns === 'a').length).toBeGreaterThanOrEqual(10);
  });
});

describe('fair share in the shared view', () => {
  it('reads the namespaces’ weights from the store; off when fairShare is false', async () => {
    const store = new MemoryStore();
    const keys = new Keys('/fair-weights/');
    await putNamespace(store, keys, 'big', { weight: 3 }, 0);
    const view = new SharedView({ store, keys, clock: new SystemClock(), log: createLogger('test'), config: agentConfig() });
    const fair = view.fair as FairShare;
    expect(fair).toBeDefined();
    expect(fair.weight('big')).toBe(1);
    view.refreshWeights();
    for (let i = 0; i < 100 && fair.weight('big') !== 3; i++) await new Promise((r) => setImmediate(r));
    expect(fair.weight('big')).toBe(3);
    expect(fair.weight('default')).toBe(1);
    expect(view.waiters.fair).toBe(fair);
    const off = new SharedView({ store, keys, clock: new SystemClock(), log: createLogger('test'), config: agentConfig({ fairShare: false }) });
    expect(off.fair).toBeUndefined();
    expect(off.waiters.fair).toBeUndefined();
    await store.close();
  });
});
