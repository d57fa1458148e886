/**
 * Evaluation: what moves an owned job towards a final state, run by the owner's work queue
 * (job-queue.ts), one at a time per job. Facts first (facts.ts: the tasks that changed, the
 * nodes of departed servers, a half-done gang's RUs), then the plan (plan.ts planJob, pure), then
 * the plan applied (apply.ts), then the job record planned and written (summary.ts), then the
 * decision record if one is due (decisions.ts).
 */
import { trace } from '../util/trace.ts';
import type { Owned } from './job.ts';
import { applyPlan } from './apply.ts';
import { gatherFacts } from './facts.ts';
import type { MoveHost } from './moves.ts';
import { planJob } from './plan.ts';
import { writeSummary } from './summary.ts';
import { writeDecisions } from './decisions.ts';

/** One evaluation of an owned job. */
export async function evaluateJob(m: MoveHost, o: Owned): Promise<void> {
  trace('evaluate', o.id);
  try {
    const facts = await gatherFacts(m, o);
    if (o.dropped) return;
    const plan = planJob(o, facts);
    await applyPlan(m, o, plan, facts);
  } catch (err) {
    o.full = true; // what was taken from the changed set is looked at again on the retry
    throw err;
  }
  if (o.dropped) return;
  await writeSummary(m, o);
  if (!o.dropped) writeDecisions(m, o);
}
