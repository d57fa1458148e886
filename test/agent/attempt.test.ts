import { describe, expect, it } from 'vitest';
import type { AdmissionVerdict } from '../../src/admission/index.ts';
import { Attempt, backoffMs, picksPerTxn, type AttemptPolicy } from '../../src/agent/attempt.ts';
import { DEFAULT_AGENT_CONFIG } from '../../src/agent/agent.ts';
import { SeededRng } from '../../src/util/rng.ts';

const POLICY: AttemptPolicy = { maxRetries: 3, backoffBaseMs: 2, backoffMaxMs: 50, recheckMs: 1000 };

function verdict(action: AdmissionVerdict['action'], estimateMs?: number): AdmissionVerdict {
  return { action, reason: action, buckets: [], acceptableFree: 0, totalFree: 0, needed: 1, f: 0, ...(estimateMs !== undefined ? { estimateMs } : {}) };
}

describe('the attempt loop', () => {
  it('queues on an admission verdict for the estimate, bounded by recheck and by what is left of maxQueueMs', () => {
    const at = new Attempt(POLICY, new SeededRng(1), 2500);
    expect(at.queuedMs(0)).toBe(0);
    expect(at.afterVerdict(verdict('queue', 300), 0)).toEqual({ kind: 'admission-wait', ms: 300 });
    expect(at.queuedMs(120)).toBe(120);
    expect(at.afterVerdict(verdict('queue', 5000), 300)).toEqual({ kind: 'admission-wait', ms: 1000 });
    // 2,000 ms of the 2,500 ms bound used: at most 500 ms more.
    expect(at.afterVerdict(verdict('queue', 5000), 2000)).toEqual({ kind: 'admission-wait', ms: 500 });
    expect(at.admitted).toBe(false);
    // At the bound the job is placed whatever the verdict, and the realised wait is reported.
    expect(at.skipAdmission(2500)).toBe(true);
    expect(at.afterVerdict(verdict('queue', 5000), 2500)).toEqual({ kind: 'go', realisedWaitMs: 2500 });
    expect(at.admitted).toBe(true);
    expect(at.firstEstimateMs).toBe(300);
    expect(at.totals.admissionWaits).toBe(3);
    // What the verdicts are told the job has waited: from its first hold, whatever came after.
    expect(at.queuedMs(2500)).toBe(2500);
    // Back to admission later: placed at once (overdue), and the wait is not reported twice.
    at.readmit();
    expect(at.afterVerdict(verdict('queue', 100), 4000)).toEqual({ kind: 'go' });
  });

  it('admits at once on admit or best-effort, with no realised wait when it never queued', () => {
    for (const a of ['admit', 'best-effort'] as const) {
      const at = new Attempt(POLICY, new SeededRng(1), 1000);
      expect(at.afterVerdict(verdict(a), 10)).toEqual({ kind: 'go' });
      expect(at.admitted).toBe(true);
    }
  });

  it('waits for a freed RU when a selection finds nothing, or too few for an all-or-nothing chunk', () => {
    const at = new Attempt(POLICY, new SeededRng(1), 1000);
    at.afterVerdict(undefined, 0);
    expect(at.afterSelection(5, 10, false)).toEqual({ kind: 'go' });
    expect(at.afterSelection(5, 10, true)).toEqual({ kind: 'capacity-wait', ms: 1000 });
    expect(at.admitted).toBe(false);
    at.afterVerdict(undefined, 0);
    expect(at.afterSelection(0, 10, false)).toEqual({ kind: 'capacity-wait', ms: 1000 });
    expect(at.totals).toMatchObject({ capacityWaits: 2, readmissions: 2 });
  });

  it('a commit refused by the namespace quota waits as for capacity, saying why, and goes back to admission', () => {
    const at = new Attempt(POLICY, new SeededRng(1), 1000);
    at.afterVerdict(undefined, 0);
    at.retries = 2;
    expect(at.afterQuota('namespace a is at its quota: 4 of 4 RUs in use')).toEqual({
      kind: 'capacity-wait',
      ms: 1000,
      why: 'namespace a is at its quota: 4 of 4 RUs in use',
    });
    expect(at.admitted).toBe(false);
    expect(at.retries).toBe(0);
    expect(at.totals).toMatchObject({ capacityWaits: 1, readmissions: 1, conflicts: 0 });
  });

  it('goes on after a clean commit, and waits for a freed RU when it placed fewer than asked', () => {
    const at = new Attempt(POLICY, new SeededRng(1), 1000);
    at.afterVerdict(undefined, 0);
    expect(at.afterCommit({ placed: 10, conflicts: 0, asked: 10 })).toEqual({ kind: 'go' });
    expect(at.afterCommit({ placed: 4, conflicts: 0, asked: 10 })).toEqual({ kind: 'capacity-wait', ms: 1000 });
    expect(at.admitted).toBe(false);
  });

  it('backs off with growing jittered delays on conflicts, then returns to admission after maxRetries', () => {
    const at = new Attempt(POLICY, new SeededRng(7), 1000);
    at.afterVerdict(undefined, 0);
    const waits: number[] = [];
    for (let k = 1; k <= POLICY.maxRetries; k++) {
      const n = at.afterCommit({ placed: 0, conflicts: 2, asked: 2 });
      expect(n.kind).toBe('backoff');
      if (n.kind !== 'backoff') return;
      const cap = Math.min(POLICY.backoffMaxMs, POLICY.backoffBaseMs * 2 ** k);
      expect(n.ms).toBeGreaterThanOrEqual(cap / 2);
      expect(n.ms).toBeLessThanOrEqual(cap);
      expect(at.admitted).toBe(true);
      waits.push(n.ms);
    }
    expect(at.retries).toBe(POLICY.maxRetries);
    // One more conflict: back to admission, with one more backoff, retries reset.
    const last = at.afterCommit({ placed: 0, conflicts: 1, asked: 2 });
    expect(last.kind).toBe('backoff');
    expect(at.admitted).toBe(false);
    expect(at.retries).toBe(0);
    expect(at.totals).toMatchObject({ retries: POLICY.maxRetries, readmissions: 1, conflicts: 2 * POLICY.maxRetries + 1 });
    // A clean commit of the next chunk resets the retry count.
    at.afterVerdict(undefined, 0);
    at.afterCommit({ placed: 0, conflicts: 1, asked: 1 });
    expect(at.retries).toBe(1);
    at.afterCommit({ placed: 1, conflicts: 0, asked: 1 });
    expect(at.retries).toBe(0);
  });

  it('draws the same backoff for the same seed (the simulator is reproducible)', () => {
    const a = new SeededRng(3);
    const b = new SeededRng(3);
    const xs = [1, 2, 3, 4, 9].map((k) => backoffMs(POLICY, k, a));
    const ys = [1, 2, 3, 4, 9].map((k) => backoffMs(POLICY, k, b));
    expect(xs).toEqual(ys);
    expect(xs[4]).toBeLessThanOrEqual(POLICY.backoffMaxMs);
  });

  it('takes as many picks per transaction as the store op limit allows: 42 for etcd defaults', () => {
    expect(picksPerTxn(128)).toBe(42);
    expect(picksPerTxn(5)).toBe(1);
    expect(picksPerTxn(1)).toBe(1);
    // The live agent's defaults are the attempt policy the simulator uses.
    const { maxRetries, backoffBaseMs, backoffMaxMs, recheckMs, recheckMaxMs } = DEFAULT_AGENT_CONFIG;
    expect({ maxRetries, backoffBaseMs, backoffMaxMs, recheckMs, recheckMaxMs }).toEqual({
      maxRetries: 6,
      backoffBaseMs: 1,
      backoffMaxMs: 100,
      recheckMs: 1000,
      recheckMaxMs: 8000,
    });
  });

  it('doubles a wait for capacity that its timer ended, up to recheckMaxMs, and starts again when a freed RU woke it or a task was placed', () => {
    const at = new Attempt({ ...POLICY, recheckMaxMs: 5000 }, new SeededRng(1), 10_000);
    const waits: number[] = [];
    for (let i = 0; i < 5; i++) {
      const next = at.afterSelection(0, 3, false);
      expect(next.kind).toBe('capacity-wait');
      waits.push((next as { ms: number }).ms);
      at.capacityWaitEnded(false);
    }
    expect(waits).toEqual([1000, 2000, 4000, 5000, 5000]);
    // Woken by a freed RU: the next wait is recheckMs again.
    at.capacityWaitEnded(true);
    expect(at.capacityRecheckMs()).toBe(1000);
    at.capacityWaitEnded(false);
    at.capacityWaitEnded(false);
    expect(at.capacityRecheckMs()).toBe(4000);
    // A commit that placed some of the chunk, the rest finding nothing: recheckMs again.
    expect(at.afterCommit({ placed: 1, conflicts: 0, asked: 3 })).toEqual({ kind: 'capacity-wait', ms: 1000 });
    // A quota wait keeps recheckMs: its usage falls without a freed RU to say so.
    at.capacityWaitEnded(false);
    expect(at.afterQuota('quota')).toMatchObject({ ms: 1000 });
    // At or below recheckMs, the waits do not grow.
    const flat = new Attempt(POLICY, new SeededRng(1), 10_000);
    flat.capacityWaitEnded(false);
    flat.capacityWaitEnded(false);
    expect(flat.afterSelection(0, 1, false)).toEqual({ kind: 'capacity-wait', ms: 1000 });
  });
});
