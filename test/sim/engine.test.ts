import { describe, expect, it } from 'vitest';
import { Engine, type MovableTimer } from '../../src/sim/engine.ts';
import { SeededRng } from '../../src/util/rng.ts';

/**
 * Runs a random script of scheduling, moving and cancelling on one engine and returns the order
 * in which the events fired. `move` decides how an event is moved: in place, or by cancelling it
 * and scheduling its function anew (what the simulator did before events could move).
 */
function script(seed: number, move: 'in place' | 'cancel and add'): { fired: string[]; pending: number } {
  const e = new Engine();
  const rng = new SeededRng(seed);
  const fired: string[] = [];
  const live = new Map<string, MovableTimer>();
  let n = 0;
  const schedule = (name: string, ms: number): void => {
    live.set(
      name,
      e.setTimer(ms, () => {
        fired.push(`${name}@${e.now()}`);
        live.delete(name);
        // Each firing does a few more operations, as the simulator's handlers do.
        for (let k = 0; k < 3; k++) act();
      }),
    );
  };
  const act = (): void => {
    if (n >= 3000) return;
    n++;
    const r = rng.next();
    const names = [...live.keys()];
    const pick = names.length ? (names[rng.int(names.length)] as string) : undefined;
    // Integer times so that ties (ordered by scheduling sequence) happen often.
    const ms = rng.int(20);
    if (r < 0.5 || !pick) schedule(`e${n}`, ms);
    else if (r < 0.85) {
      if (move === 'in place') expect((live.get(pick) as MovableTimer).moveTo(e.now() + ms)).toBe(true);
      else {
        (live.get(pick) as MovableTimer).cancel();
        const fn = pick;
        schedule(fn, ms);
      }
    } else {
      (live.get(pick) as MovableTimer).cancel();
      live.delete(pick);
    }
  };
  for (let k = 0; k < 200; k++) act();
  e.run();
  return { fired, pending: e.pending };
}

describe('the simulator engine', () => {
  it('moving an event in place fires events in exactly the order cancelling and re-adding it did, and leaves no dead event behind', () => {
    for (const seed of [1, 2, 3]) {
      const a = script(seed, 'in place');
      const b = script(seed, 'cancel and add');
      expect(a.fired.length).toBeGreaterThan(300);
      expect(a.fired).toEqual(b.fired);
      expect(a.pending).toBe(0);
    }
  });

  it('does not move an event that fired or was cancelled', () => {
    const e = new Engine();
    const order: string[] = [];
    const a = e.setTimer(5, () => order.push('a'));
    const b = e.setTimer(10, () => order.push('b'));
    const c = e.setTimer(15, () => order.push('c'));
    expect(c.moveTo(1)).toBe(true);
    b.cancel();
    expect(b.moveTo(2)).toBe(false);
    e.run(6);
    expect(order).toEqual(['c', 'a']);
    expect(a.moveTo(20)).toBe(false);
    // Moved earlier than now (5, the last event's time): clamped to now.
    const d = e.setTimer(30, () => order.push(`d@${e.now()}`));
    expect(d.moveTo(0)).toBe(true);
    e.run();
    expect(order).toEqual(['c', 'a', 'd@5']);
  });

  it('events on a fixed-delay lane or with an argument fire in the order the heap gives them', () => {
    // The same random script twice: with every event through the heap (after), and with the
    // fixed-delay events on lanes and the rest as postArg; integer delays make ties common.
    const run = (lanes: boolean): string[] => {
      const e = new Engine();
      const rng = new SeededRng(7);
      const fired: string[] = [];
      const delays = [0.5, 2, 3];
      const ids = delays.map((d) => e.lane(d));
      let n = 0;
      const fire = (name: string): void => {
        fired.push(`${name}@${e.now()}`);
        for (let k = 0; k < 2; k++) act();
      };
      const act = (): void => {
        if (n >= 4000) return;
        const name = `e${++n}`;
        const k = rng.int(delays.length + 1);
        if (k < delays.length) {
          if (lanes) e.afterLane(ids[k] as number, fire, name);
          else e.after(delays[k] as number, () => fire(name));
        } else {
          const ms = rng.int(10);
          if (lanes) e.postArg(e.now() + ms, fire, name);
          else e.after(ms, () => fire(name));
        }
      };
      for (let k = 0; k < 50; k++) act();
      expect(e.pending).toBe(50);
      e.run();
      expect(e.pending).toBe(0);
      return fired;
    };
    const a = run(true);
    expect(a.length).toBe(4000);
    expect(a).toEqual(run(false));
  });

  it('stops at `until` with lane events pending, and resumes in order', () => {
    const e = new Engine();
    const order: string[] = [];
    const lane = e.lane(1);
    e.afterLane(lane, (x: string) => order.push(x), 'a');
    e.after(1, () => order.push('b'));
    e.after(2, () => e.afterLane(lane, (x: string) => order.push(x), 'c'));
    e.run(1.5);
    expect(order).toEqual(['a', 'b']);
    expect(e.pending).toBe(1);
    e.run();
    expect(order).toEqual(['a', 'b', 'c']);
    expect(e.now()).toBe(3);
  });
});
