import { describe, expect, it } from 'vitest';
import { AdaptiveLimit, URGENT_STREAK } from '../../src/store/adaptive-limit.ts';
import { TarcilError } from '../../src/util/errors.ts';

/** A request that answers when the test says so. */
function pending(): { p: Promise<void>; answer: () => void; fail: (e: unknown) => void } {
  let answer!: () => void;
  let fail!: (e: unknown) => void;
  const p = new Promise<void>((res, rej) => {
    answer = res;
    fail = rej;
  });
  return { p, answer, fail };
}

const turns = async (n = 5): Promise<void> => {
  for (let i = 0; i < n; i++) await Promise.resolve();
};

describe('AdaptiveLimit', () => {
  it('keeps at most `limit` requests in flight and lets the waiting ones through in order', async () => {
    const lim = new AdaptiveLimit({ initial: 3, min: 1, max: 3 });
    const reqs = Array.from({ length: 7 }, () => pending());
    const started: number[] = [];
    const runs = reqs.map((r, i) =>
      lim.run(async () => {
        started.push(i);
        await r.p;
      }),
    );
    await turns();
    expect(started).toEqual([0, 1, 2]);
    expect(lim.stats()).toMatchObject({ inFlight: 3, queued: 4 });
    reqs[1]!.answer();
    await turns();
    expect(started).toEqual([0, 1, 2, 3]);
    for (const r of reqs) r.answer();
    await Promise.all(runs);
    expect(started).toEqual([0, 1, 2, 3, 4, 5, 6]);
    expect(lim.stats()).toMatchObject({ inFlight: 0, queued: 0 });
  });

  it('cuts the limit on slow answers, once per slow window, and grows it back on prompt ones', async () => {
    let now = 0;
    const lim = new AdaptiveLimit({ initial: 40, min: 4, max: 64, slowMs: 1000, decrease: 0.5, now: () => now });
    const slow = (): Promise<void> => {
      now += 1500;
      return Promise.resolve();
    };
    const prompt = (): Promise<void> => Promise.resolve();
    // A burst of slow answers within one window counts once.
    await Promise.all([lim.run(slow), lim.run(prompt)]);
    expect(lim.limit).toBe(20);
    await lim.run(() => {
      now += 1200;
      return Promise.resolve();
    });
    expect(lim.limit).toBe(10);
    for (let i = 0; i < 6; i++) await lim.run(slow);
    expect(lim.limit).toBe(4); // never below min
    const cuts = lim.stats().decreases;
    // Prompt answers: about one more slot per `limit` answers.
    for (let i = 0; i < 200; i++) await lim.run(prompt);
    expect(lim.limit).toBeGreaterThan(15);
    expect(lim.limit).toBeLessThan(25);
    expect(lim.stats().decreases).toBe(cuts);
  });

  it('a timeout cuts the limit; a refusal or an unreachable store does not', async () => {
    let now = 0;
    const lim = new AdaptiveLimit({ initial: 16, slowMs: 1000, now: () => now });
    const failWith = (e: Error) => lim.run(() => Promise.reject(e)).catch(() => undefined);
    await failWith(new TarcilError('INVALID_ARGUMENT', 'bad key'));
    await failWith(new TarcilError('UNAVAILABLE', 'connect ECONNREFUSED'));
    expect(lim.stats().decreases).toBe(0);
    await failWith(new TarcilError('DEADLINE_EXCEEDED', 'deadline exceeded after 2 s'));
    expect(lim.stats().decreases).toBe(1);
    now += 2000;
    await failWith(new TarcilError('UNAVAILABLE', 'etcdserver: request timed out, waiting for the applied index took too long'));
    expect(lim.stats().decreases).toBe(2);
    expect(lim.limit).toBeLessThan(16);
  });

  it('fails a request that waited longer than maxWaitMs for its slot without sending it, and lets the next one through', async () => {
    let now = 0;
    const lim = new AdaptiveLimit({ initial: 1, min: 1, max: 1, maxWaitMs: 5000, now: () => now });
    const first = pending();
    const sent: string[] = [];
    const a = lim.run(async () => {
      sent.push('a');
      await first.p;
    });
    const b = lim.run(() => {
      sent.push('b');
      return Promise.resolve();
    });
    await turns();
    expect(lim.stats()).toMatchObject({ inFlight: 1, queued: 1 });
    now += 6000; // b has waited 6 s when a answers
    const c = lim.run(() => {
      sent.push('c');
      return Promise.resolve();
    });
    first.answer();
    await a;
    await expect(b).rejects.toMatchObject({ code: 'UNAVAILABLE' });
    await c; // queued at 6 s, woken at once: not stale
    expect(sent).toEqual(['a', 'c']);
    expect(lim.stats()).toMatchObject({ inFlight: 0, queued: 0, shed: 1 });
  });

  it('lets urgent requests through ahead of the others waiting, and one of the others after URGENT_STREAK in a row', async () => {
    const lim = new AdaptiveLimit({ initial: 1, min: 1, max: 1 });
    const first = pending();
    const started: string[] = [];
    const gates = new Map<string, ReturnType<typeof pending>>();
    const run = (name: string, urgent: boolean): Promise<void> =>
      lim.run(async () => {
        started.push(name);
        const g = pending();
        gates.set(name, g);
        await g.p;
      }, urgent);
    const runs = [
      lim.run(async () => {
        started.push('first');
        await first.p;
      }),
    ];
    await turns();
    for (const n of ['n1', 'n2']) runs.push(run(n, false));
    for (let i = 1; i <= URGENT_STREAK + 2; i++) runs.push(run(`u${i}`, true));
    await turns();
    expect(lim.stats()).toMatchObject({ inFlight: 1, queued: 2 + URGENT_STREAK + 2 });
    first.answer();
    // One at a time: answer whatever was let through last.
    for (let i = 0; i < 2 + URGENT_STREAK + 2; i++) {
      await turns();
      gates.get(started[started.length - 1]!)!.answer();
    }
    await Promise.all(runs);
    const urgent = Array.from({ length: URGENT_STREAK }, (_, i) => `u${i + 1}`);
    expect(started).toEqual(['first', ...urgent, 'n1', `u${URGENT_STREAK + 1}`, `u${URGENT_STREAK + 2}`, 'n2']);
  });

  it('sends an urgent request at once when a slot is free', async () => {
    const lim = new AdaptiveLimit({ initial: 2, min: 1, max: 2 });
    const a = pending();
    const started: string[] = [];
    const ra = lim.run(async () => {
      started.push('a');
      await a.p;
    });
    const rb = lim.run(() => {
      started.push('u');
      return Promise.resolve();
    }, true);
    await turns();
    expect(started).toEqual(['a', 'u']);
    a.answer();
    await Promise.all([ra, rb]);
    expect(lim.stats()).toMatchObject({ inFlight: 0, queued: 0 });
  });
});
