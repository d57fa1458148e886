/**
 * The step sequence of the attempt loop (attempt-steps.ts), driven by hand: the order of its steps
 * for incremental chunks, a quota's cut and refusal, a partial conflict (kept or landed picks), a
 * gang reserved chunk by chunk (confirmed, or given back), and commit-ahead.
 */
import { describe, expect, it } from 'vitest';
import { Attempt, type AttemptPolicy } from '../../src/agent/attempt.ts';
import { AttemptSteps, stepLine, type Outcome, type StepsOptions } from '../../src/agent/attempt-steps.ts';
import { SeededRng } from '../../src/util/rng.ts';

const POLICY: AttemptPolicy = { maxRetries: 2, backoffBaseMs: 2, backoffMaxMs: 50, recheckMs: 100 };

/** Runs the sequence over the given outcomes (after its first step) and returns the steps as lines. */
function run(o: Omit<StepsOptions, 'onStep'>, outcomes: Outcome[], bypasses = false): { lines: string[]; steps: AttemptSteps } {
  const steps = new AttemptSteps(new Attempt(POLICY, new SeededRng(1), 10_000, bypasses), o);
  const lines = [stepLine(steps.start())];
  for (const out of outcomes) lines.push(stepLine(steps.next(out)));
  return { lines, steps };
}

const go: Outcome = { kind: 'verdict', verdict: undefined, now: 0 };
const noYield: Outcome = { kind: 'fair', yield: false };
const decided = (picks: number, kept = 0): Outcome => ({ kind: 'decided', picks, kept });
const committed = (placed: number, conflicts = 0, kept = 0): Outcome => ({ kind: 'committed', placed, conflicts, kept });
const waited: Outcome = { kind: 'waited', woken: false };

describe('the step sequence', () => {
  it('places an incremental job chunk by chunk: fair share, admission, then decide and commit each chunk', () => {
    const { lines } = run({ tasks: 50, perTxn: 42, gang: false }, [noYield, go, decided(42), committed(42), noYield, decided(8), committed(8)]);
    expect(lines).toEqual(['fair 42', 'admit 50', 'decide 42', 'commit 42/42', 'fair 8', 'decide 8', 'commit 8/8', 'done']);
  });

  it('retries a partial conflict on the same chunk, resampling only the conflicting picks; back to admission after the retries', () => {
    const { lines } = run({ tasks: 5, perTxn: 42, gang: false }, [
      noYield,
      go,
      decided(5),
      committed(0, 2, 3),
      waited,
      decided(5, 3),
      committed(0, 1, 4),
      waited,
      decided(5, 4),
      committed(0, 1, 4),
      waited,
    ]);
    expect(lines).toEqual([
      'fair 5',
      'admit 5',
      'decide 5',
      'commit 5/5',
      'wait backoff retry',
      'decide 5 again',
      'commit 5/5',
      'wait backoff retry',
      'decide 5 again',
      'commit 5/5',
      // Retries used up: back to admission after one more backoff, the chunk ended.
      'wait backoff readmitted',
      'fair 5',
    ]);
  });

  it('refills the chunk from what is left when picks of a conflicting commit landed (the simulator)', () => {
    const { lines, steps } = run({ tasks: 50, perTxn: 42, gang: false }, [noYield, go, decided(42), committed(40, 2), waited]);
    expect(lines.slice(-2)).toEqual(['wait backoff retry', 'decide 10 again']);
    expect(steps.left).toBe(10);
  });

  it('takes what a quota leaves, and waits with its reason when nothing is left', () => {
    const quota = (room: number): Outcome => ({ kind: 'committed', placed: 0, conflicts: 0, quota: { room, message: 'namespace q is at its quota' } });
    const { lines } = run({ tasks: 5, perTxn: 42, gang: false }, [noYield, go, decided(5), quota(2), decided(2), committed(2), noYield, decided(3), quota(0)]);
    expect(lines).toEqual([
      'fair 5',
      'admit 5',
      'decide 5',
      'commit 5/5',
      'decide 2 again',
      'commit 2/2',
      'fair 3',
      'decide 3',
      'commit 3/3',
      'wait quota readmitted',
    ]);
    // A gang waits for all of its chunk.
    const gang = run({ tasks: 5, perTxn: 42, gang: true }, [noYield, go, decided(5), quota(2)]);
    expect(gang.lines.at(-1)).toBe('wait quota readmitted');
  });

  it('reserves a gang larger than one transaction chunk by chunk, then confirms it; a chunk that cannot be reserved gives all back', () => {
    const ok = run({ tasks: 50, perTxn: 42, gang: true }, [go, decided(42), committed(42), decided(8), committed(8), { kind: 'confirmed' }]);
    expect(ok.lines).toEqual(['admit 50', 'decide-reserve 42', 'reserve 42/42', 'decide-reserve 8', 'reserve 8/8', 'confirm 50', 'done']);
    const short = run({ tasks: 50, perTxn: 42, gang: true }, [go, decided(42), committed(42), decided(0), { kind: 'released' }, waited]);
    expect(short.lines).toEqual(['admit 50', 'decide-reserve 42', 'reserve 42/42', 'decide-reserve 8', 'release 42', 'wait capacity readmitted', 'admit 50']);
    expect(short.steps.left).toBe(50);
    // A required pack's reservation finds room for every task left.
    const pack = new AttemptSteps(new Attempt(POLICY, new SeededRng(1), 10_000), { tasks: 50, perTxn: 42, gang: true, pack: true });
    pack.start();
    expect(pack.next(go)).toMatchObject({ kind: 'decide', chunk: 42, room: 50, reserve: true });
  });

  it('sends a commit-ahead run for a large job, and the chunk path when it sent nothing', () => {
    const { lines } = run({ tasks: 100, perTxn: 42, gang: false, ahead: true }, [
      noYield,
      go,
      { kind: 'ahead', asked: 84, placed: 84, conflicts: 0 },
      noYield,
      decided(16),
      committed(16),
    ]);
    expect(lines).toEqual(['fair 42', 'admit 100', 'ahead 100', 'fair 16', 'decide 16', 'commit 16/16', 'done']);
    const none = run({ tasks: 100, perTxn: 42, gang: false, ahead: true }, [noYield, go, { kind: 'ahead', asked: 0, placed: 0, conflicts: 0 }]);
    expect(none.lines.at(-1)).toBe('decide 42');
    // A run whose last chunk found fewer free RUs than it needed: the rest waits for freed RUs,
    // back through admission, instead of deciding that chunk again.
    const short = run({ tasks: 100, perTxn: 42, gang: false, ahead: true }, [noYield, go, { kind: 'ahead', asked: 52, placed: 52, conflicts: 0, short: 32 }]);
    expect(short.lines.at(-1)).toBe('wait capacity readmitted');
    expect(short.steps.left).toBe(48);
    // Without `short`, a run that placed all it sent goes on to the next round.
    const whole = run({ tasks: 100, perTxn: 42, gang: false, ahead: true }, [noYield, go, { kind: 'ahead', asked: 52, placed: 52, conflicts: 0 }]);
    expect(whole.lines.at(-1)).toBe('fair 42');
  });

  it('a wait for capacity that its timer ended makes the next one longer; one a freed RU ended does not', () => {
    const steps = new AttemptSteps(new Attempt({ ...POLICY, recheckMaxMs: 1000 }, new SeededRng(1), 10_000), { tasks: 3, perTxn: 42, gang: false });
    const ms: number[] = [];
    steps.start();
    for (const woken of [false, false, true, false]) {
      steps.next(noYield);
      steps.next(go);
      const w = steps.next(decided(0));
      expect(w).toMatchObject({ kind: 'wait', for: 'capacity' });
      ms.push((w as { ms: number }).ms);
      steps.next({ kind: 'waited', woken });
    }
    expect(ms).toEqual([100, 200, 400, 100]);
  });

  it('waits behind other namespaces when fair share says so, and skips the check once a freed RU woke it', () => {
    const { lines } = run({ tasks: 3, perTxn: 42, gang: false }, [
      { kind: 'fair', yield: true },
      { kind: 'waited', woken: true },
    ]);
    expect(lines).toEqual(['fair 3', 'wait fair', 'admit 3']);
  });
});
