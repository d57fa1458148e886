/**
 * The live driver of the step sequence (attempt-steps.ts): each step performed with awaits on the
 * store and the clock, over the call's context (attempt-context.ts). The chunk path's steps are
 * in chunks.ts, a gang's reservations in gang.ts, the waits in waits.ts.
 */
import { hardPack } from '../sampling/feasibility.ts';
import { hasQuotaNamespace } from '../tenancy/quota.ts';
import type { AttemptContext } from './attempt-context.ts';
import { AttemptSteps, type Outcome, type Step } from './attempt-steps.ts';
import { ChunkPlacer } from './chunks.ts';
import { GangPlacer } from './gang.ts';
import { admissionWait, askAdmission, waitForCapacity } from './waits.ts';

type Wait = Extract<Step, { kind: 'wait' }>;

/**
 * Places the call's tasks (cx.tasks) as the step sequence says: chunk by chunk, or a gang larger
 * than one transaction reserved chunk by chunk then confirmed. A request whose priority bypasses
 * others' waits for a freed RU after a lost race (the context's Attempt), as in the simulator.
 */
export async function drive(cx: AttemptContext): Promise<void> {
  const { agent: a, job } = cx;
  const gang = job.mode === 'gang';
  const onStep = a.onStep;
  const steps = new AttemptSteps(cx.at, {
    tasks: cx.tasks.length,
    perTxn: a.picksPerTxn,
    gang,
    ahead: a.config.commitAhead > 1 && !gang && !a.config.recordJob && !hasQuotaNamespace(job.id),
    pack: hardPack(job.locality),
    onStep: onStep && ((s, after) => onStep(job.id, s, after)),
  });
  const d = new LiveSteps(cx, steps.reserving ? new GangPlacer(cx) : new ChunkPlacer(cx));
  try {
    for (let s = steps.start(); s.kind !== 'done';) {
      // Awaits only where a step waits: a decision and the claims of its commit are one turn of
      // the event loop, so no other decision of this process sees its RUs free meanwhile.
      const turn = s.kind === 'decide' ? d.turn(s) : undefined;
      if (turn) await turn;
      const o = d.perform(s);
      s = steps.next(o instanceof Promise ? await o : o);
    }
  } catch (err) {
    await d.abandon();
    throw err;
  } finally {
    d.end();
  }
}

class LiveSteps {
  /** The tasks the last admission verdict asked about (its wait is for them). */
  private want = 0;

  constructor(
    private readonly cx: AttemptContext,
    private readonly place: ChunkPlacer | GangPlacer,
  ) {}

  perform(s: Exclude<Step, { kind: 'done' }>): Promise<Outcome> | Outcome {
    const { cx, place } = this;
    switch (s.kind) {
      case 'fair':
        cx.assertOpen();
        this.end();
        return this.fair(s.need);
      case 'admit': {
        cx.assertOpen();
        this.end();
        const { verdict, want } = askAdmission(cx, s.need);
        this.want = want;
        return { kind: 'verdict', verdict, now: cx.agent.clock.now() };
      }
      case 'ahead':
        cx.assertOpen();
        return (place as ChunkPlacer).ahead();
      case 'decide':
        return place instanceof ChunkPlacer ? place.decide() : place.decide(s);
      case 'commit':
        return place.commit();
      case 'confirm':
        return (place as GangPlacer).confirm();
      case 'release':
        return (place as GangPlacer).release();
      case 'wait':
        if (!s.retry) this.end();
        return this.wait(s);
    }
  }

  /** Before a decision: the chunk's commit turn (group commit); nothing to wait for in a gang's. */
  turn(s: Extract<Step, { kind: 'decide' }>): Promise<void> | undefined {
    this.cx.assertOpen();
    return this.place instanceof ChunkPlacer ? this.place.turn(s) : undefined;
  }

  /** Ends the chunk being placed, if any. */
  end(): void {
    if (this.place instanceof ChunkPlacer) this.place.endChunk();
  }

  async abandon(): Promise<void> {
    if (this.place instanceof GangPlacer) await this.place.abandon();
  }

  private fair(need: number): Outcome {
    const a = this.cx.agent;
    const job = this.cx.job;
    const y = a.view.mustYield(job.id, need);
    if (y) a.stats.fairYields++;
    if (!y && a.view.reserveHolds(job.profile.name, job.priority)) {
      a.stats.reserveHolds++;
      return { kind: 'fair', yield: true, reserve: true };
    }
    return { kind: 'fair', yield: y };
  }

  private async wait(s: Wait): Promise<Outcome> {
    const { cx } = this;
    const { agent: a, rec } = cx;
    if (s.for === 'fair') {
      await cx.waiting.ensure(s.need);
      return { kind: 'waited', woken: await waitForCapacity(cx, { ms: s.ms, need: s.need, why: s.why }) };
    }
    if (s.for === 'admission') {
      await admissionWait(cx, { ms: s.ms, needed: s.need, want: this.want });
      return { kind: 'waited', woken: false };
    }
    if (s.counted) rec.retries++;
    if (s.retry) {
      // Within the chunk: its kept picks stay chosen while it backs off.
      if (s.for === 'freed') await waitForCapacity(cx, { ms: s.ms, need: s.need });
      else await a.clock.sleep(s.ms);
      return { kind: 'waited', woken: false };
    }
    if (s.readmitted) {
      rec.readmissions++;
      a.stats.readmissions++;
      await cx.waiting.ensure(this.place instanceof GangPlacer ? cx.tasks.length : s.need);
    }
    if (s.for === 'capacity' || s.for === 'quota') {
      return { kind: 'waited', woken: await waitForCapacity(cx, { ms: s.ms, need: s.need, why: s.why, quota: s.why !== undefined }) };
    }
    if (s.for === 'freed') return { kind: 'waited', woken: await waitForCapacity(cx, { ms: s.ms, need: s.need }) };
    const q0 = a.clock.now();
    await a.clock.sleep(s.ms);
    rec.stageMs.queue += a.clock.now() - q0;
    return { kind: 'waited', woken: false };
  }
}
