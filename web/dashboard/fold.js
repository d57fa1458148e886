// What the job page folds: runs of repeated rows become one row with a count. Pure functions.

/**
 * Consecutive items with the same key, as groups: { item (the latest of the run), count, first,
 * last } (first and last: 0-based positions in the list).
 */
export function foldRuns(items, keyOf) {
  const out = [];
  items.forEach((item, i) => {
    const key = keyOf(item);
    const top = out[out.length - 1];
    if (top && top.key === key) {
      top.count++;
      top.last = i;
      top.item = item;
    } else out.push({ key, item, count: 1, first: i, last: i });
  });
  return out;
}

/** Sample attempts: the same R, f (to 3 decimals) and number of candidates. */
export const foldSamples = (samples) => foldRuns(samples ?? [], (s) => `${s.r}|${(s.f ?? 0).toFixed(3)}|${s.candidates}`);

/**
 * Admission verdicts: the same action and the same reason once its numbers are set aside (the
 * estimates and counts of a waiting job's verdicts change a little from one to the next).
 */
export const foldAdmission = (verdicts) => foldRuns(verdicts ?? [], (a) => `${a.action}|${String(a.reason ?? '').replace(/\d+(\.\d+)?/g, '#')}`);

/** A job's events as the page saw them: the same state, tasks and message. */
export const foldEvents = (events) => foldRuns(events ?? [], (e) => `${e.state}|${e.tasks}|${e.message}`);

/** "attempts 3–62" or "attempt 3" (1-based). */
export function span(g, noun) {
  return g.count === 1 ? `${noun} ${g.first + 1}` : `${noun}s ${g.first + 1}–${g.last + 1}`;
}

/**
 * The job's current reason: the one the front-end gives (Explanation.reason), else one said from
 * the state and the newest waiting message or admission verdict it has.
 */
export function currentReason(e, summary) {
  if (e?.reason?.text) return e.reason;
  const state = summary?.state ?? e?.state ?? '';
  const t = summary?.taskStates ?? {};
  const n = summary?.tasks ?? 0;
  if (state === 'succeeded') return { kind: 'done', text: `Succeeded: all ${n} tasks finished.` };
  if (state === 'failed') return { kind: 'done', text: `Failed${summary?.message ? `: ${summary.message}` : '.'}` };
  if (state === 'cancelled') return { kind: 'done', text: 'Cancelled.' };
  if (state === 'running' && (t.queued ?? 0) === 0) return { kind: 'running', text: `Running: ${t.running ?? 0} of ${n} tasks run now.` };
  const waiting = e?.waitingFor || summary?.message;
  if (waiting) return { kind: 'waiting', text: `Waiting: ${waiting}.`.replace(/\.\.$/, '.') };
  const adm = (e?.admission ?? [])[(e?.admission ?? []).length - 1];
  if (adm && adm.action !== 'admit') return { kind: 'admission', text: `Held by admission: ${adm.reason}.`.replace(/\.\.$/, '.') };
  if (state === '') return null;
  return { kind: 'placing', text: `Being placed: ${t.placed ?? 0} of ${n} tasks placed.` };
}
