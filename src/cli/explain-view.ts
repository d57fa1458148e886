/**
 * `tarcil explain -o wide`: the account `explain` prints, then everything the decision record
 * holds that it summarises — each decision (scheduling call) with its own conflicts, retries and
 * time per stage; every admission verdict (the account shows the first and the latest); every
 * sample attempt (R, f, candidates seen); and every placement kept with its server's platform and
 * rack, the task's attempt, Q and its two sides, score and commit revision. Equal verdicts and
 * sample attempts in a row are one line, with their count (`×60`) and the range of their numbers.
 */
import Table from 'cli-table3';
import type { Explanation__Output } from '../rpc/gen/tarcil/v1/Explanation.ts';
import { foldRuns } from '../util/fold-runs.ts';
import { tableStyle } from './color.ts';

const ms = (v: number): string => (v >= 10_000 ? `${(v / 1000).toFixed(1)} s` : `${v.toFixed(v < 10 ? 2 : 0)} ms`);
const clock = (t: number): string => (t > 0 ? new Date(t).toISOString().slice(11, 23) : '');
const q3 = (v: number): string => v.toFixed(3);
/** A run's numbers and count: `4`, or `4-63` and `×60`. */
const span = (first: number, count: number): string => (count > 1 ? `${first}-${first + count - 1}` : String(first));
const times = (count: number): string => (count > 1 ? `×${count}` : '');

/** The lines `explain -o wide` prints after the account (e.text). */
export function explainWideLines(e: Explanation__Output): string[] {
  const lines: string[] = [];
  const style = tableStyle();
  if (e.decisions.length > 0) {
    lines.push('', `decisions (${e.decisions.length}):`);
    const t = new Table({
      style,
      head: ['#', 'agent', 'started', 'finished', 'placed', 'conflicts', 'retries', 'returns', 'queued', 'admission', 'sizing', 'sample+select', 'commit'],
    });
    e.decisions.forEach((d, i) => {
      const s = d.stages;
      t.push([
        i,
        d.agent,
        clock(d.startedAtMs),
        d.finishedAtMs > 0 ? clock(d.finishedAtMs) : 'running',
        d.placed,
        d.conflicts,
        d.retries,
        d.readmissions,
        ms(d.queuedMs),
        ms(s?.admissionMs ?? 0),
        ms(s?.sizeMs ?? 0),
        ms(s?.selectMs ?? 0),
        ms(s?.commitMs ?? 0),
      ]);
    });
    lines.push(t.toString());
  }
  if (e.admission.length > 0) {
    lines.push('', `admission verdicts (${e.admission.length}):`);
    const t = new Table({
      style,
      head: ['#', 'decision', 'action', 'acceptable free', 'free', 'needed', 'f', 'estimated wait', 'bound', 'buckets', 'sampled', 'reason', 'times'],
    });
    const row = (v: Explanation__Output['admission'][number]): (string | number)[] => {
      const sampled = v.sampled ? `${v.sampled.acceptable}/${v.sampled.drawn} acceptable (≥ ${v.sampled.acceptableLow.toFixed(1)})` : '';
      return [
        v.decision,
        v.action,
        v.acceptableFree,
        v.totalFree,
        v.needed,
        v.f.toFixed(3),
        v.estimateMs !== undefined ? ms(v.estimateMs) : '',
        v.boundMs !== undefined ? ms(v.boundMs) : '',
        v.buckets.join(','),
        sampled,
        v.reason,
      ];
    };
    // Verdicts in a row that differ only in their estimated wait are one line, with the latest's.
    const key = (v: Explanation__Output['admission'][number]): string => JSON.stringify(row({ ...v, estimateMs: 0, boundMs: 0 }));
    for (const { count, first } of foldRuns(e.admission, key))
      t.push([span(first, count), ...row(e.admission[first + count - 1] as Explanation__Output['admission'][number]), times(count)]);
    lines.push(t.toString());
  }
  if (e.samples.length > 0) {
    lines.push('', `sample attempts (${e.samples.length}):`);
    const t = new Table({ style, head: ['#', 'decision', 'R', 'f', 'candidates', 'times'] });
    const row = (s: Explanation__Output['samples'][number]): (string | number)[] => [s.decision, s.r, s.f.toFixed(3), s.candidates];
    for (const { item, count, first } of foldRuns(e.samples, (s) => JSON.stringify(row(s)))) t.push([span(first, count), ...row(item), times(count)]);
    lines.push(t.toString());
  }
  if (e.placements.length > 0) {
    const omitted = e.placementsOmitted > 0 ? `; ${e.placementsOmitted} more not kept in the record` : '';
    lines.push('', `placements (${e.placements.length}${omitted}):`);
    const t = new Table({
      style,
      head: ['task', 'attempt', 'RU', 'platform', 'rack', 'Q', 'own Q', 'neighbours Q', 'acceptable', 'score', 'decision', 'commit rev', 'note'],
    });
    for (const p of e.placements) {
      const note = [
        p.preemptedJob ? `preempted ${p.preemptedJob}` : '',
        p.harmsNeighbours ? 'a neighbour past its tolerance' : '',
        p.movedFrom ? `moved from ${p.movedFrom.server}/${p.movedFrom.index} (rate ${p.movedFromRate.toFixed(2)})` : '',
      ]
        .filter(Boolean)
        .join('; ');
      t.push([
        p.task,
        p.attempt,
        p.ru ? `${p.ru.server}/${p.ru.index}` : '',
        p.platform || '-',
        p.rack || '-',
        q3(p.q),
        p.twoSided ? q3(p.selfQ) : '',
        p.twoSided ? `${q3(p.neighboursQ)} (${p.neighbours})` : '',
        p.acceptable ? 'yes' : 'no',
        p.score.toFixed(3),
        p.decision,
        String(p.commitRevision),
        note,
      ]);
    }
    lines.push(t.toString());
  }
  return lines;
}
