/**
 * `tarcil explain -o wide`: the decision record in full, from an Explanation as a client decodes
 * it (the message built by the front-end, through the wire format of the .proto files).
 */
import { describe, expect, it } from 'vitest';
import { explainWideLines } from '../../src/cli/explain-view.ts';
import { explanationToProto } from '../../src/frontend/convert.ts';
import type { Explanation, Explanation__Output } from '../../src/rpc/gen/tarcil/v1/Explanation.ts';
import { LOADER_OPTIONS, protoRoot } from '../../src/rpc/proto-root.ts';
import type { DecisionRecord } from '../../src/state/decisions.ts';

const T0 = Date.UTC(2026, 0, 2, 3, 4, 5, 600);

function record(over: Partial<DecisionRecord>): DecisionRecord {
  return {
    job: 'j1',
    agent: 'a0',
    target: 0.8,
    admission: [],
    samples: [],
    placements: [],
    conflicts: 0,
    retries: 0,
    readmissions: 0,
    queuedMs: 0,
    stageMs: { admission: 0.5, size: 0.25, select: 3, commit: 4, queue: 0 },
    startedAt: T0,
    finishedAt: T0 + 20,
    ...over,
  };
}

/** Two decisions: the first queued then placed task 0 with a conflict; the second placed task 1 again (attempt 1), two-sided, preempting. */
const RECORDS: DecisionRecord[] = [
  record({
    admission: [
      { action: 'queue', reason: 'too few free', buckets: [3], acceptableFree: 1, totalFree: 9, needed: 2, estimateMs: 1500, boundMs: 4000, f: 0.111 },
      {
        action: 'admit',
        reason: 'enough now',
        buckets: [3, 4],
        acceptableFree: 5,
        totalFree: 9,
        needed: 2,
        f: 0.556,
        sampled: { drawn: 8, acceptable: 5, acceptableLow: 2.5 },
      },
    ],
    samples: [{ R: 12, f: 0.556, candidates: 12 }],
    placements: [{ task: 0, ru: { server: 's1', index: 1 }, Q: 0.912, acceptable: true, score: 0.95, commitRevision: 41 }],
    conflicts: 1,
    retries: 1,
    queuedMs: 1200,
  }),
  record({
    agent: 'a1',
    startedAt: T0 + 5000,
    finishedAt: undefined,
    admission: [{ action: 'best-effort', reason: 'no history', buckets: [], acceptableFree: 0, totalFree: 2, needed: 1, f: 0 }],
    samples: [
      { R: 7, f: 0.2, candidates: 7 },
      { R: 9, f: 0.1, candidates: 9 },
    ],
    placements: [
      {
        task: 1,
        ru: { server: 's2', index: 0 },
        Q: 0.61,
        acceptable: false,
        score: 0.5,
        commitRevision: 77,
        attempt: 1,
        sides: { selfQ: 0.7, neighboursQ: 0.61, neighbours: 3 },
        preempted: { job: 'low', task: 4, priority: 1 },
      },
    ],
    omittedPlacements: 5,
    stageMs: { admission: 1, size: 2, select: 30, commit: 12_500, queue: 0 },
  }),
];

const SERVERS: Record<string, { platform: string; rack: string }> = {
  s1: { platform: 'r3-2xlarge', rack: 'r007' },
  s2: { platform: 'c4-large', rack: 'r012' },
};

/** The message as a client decodes it: encoded and decoded with the loader's options. */
function overTheWire(e: Explanation): Explanation__Output {
  const t = protoRoot().lookupType('tarcil.v1.Explanation');
  const { includeDirs: _dirs, ...convert } = LOADER_OPTIONS;
  return t.toObject(t.decode(t.encode(t.fromObject(e)).finish()), convert) as unknown as Explanation__Output;
}

describe('explain -o wide', () => {
  const e = overTheWire(explanationToProto('j1', 'running', { records: RECORDS, inProgress: true, updatedAt: T0 }, undefined, '', [], (id) => SERVERS[id]));

  it('the message names the decision of each verdict, sample and placement, and where each placement is', () => {
    expect(e.decisions.map((d) => [d.agent, d.startedAtMs, d.finishedAtMs, d.conflicts, d.retries, d.placed, d.placementsOmitted])).toEqual([
      ['a0', T0, T0 + 20, 1, 1, 1, 0],
      ['a1', T0 + 5000, 0, 0, 0, 6, 5],
    ]);
    expect(e.decisions[1]?.stages?.commitMs).toBe(12_500);
    expect(e.admission.map((v) => v.decision)).toEqual([0, 0, 1]);
    expect(e.admission[1]?.sampled).toEqual({ drawn: 8, acceptable: 5, acceptableLow: 2.5 });
    expect(e.admission[0]?.sampled).toBeNull();
    expect(e.samples.map((s) => [s.decision, s.r])).toEqual([
      [0, 12],
      [1, 7],
      [1, 9],
    ]);
    expect(e.placements.map((p) => [p.task, p.decision, p.attempt, p.platform, p.rack])).toEqual([
      [0, 0, 0, 'r3-2xlarge', 'r007'],
      [1, 1, 1, 'c4-large', 'r012'],
    ]);
  });

  it('a server the front-end does not know has no platform or rack', () => {
    const gone = overTheWire(explanationToProto('j1', 'running', { records: RECORDS, inProgress: false, updatedAt: T0 }, undefined));
    expect(gone.placements.map((p) => [p.platform, p.rack])).toEqual([
      ['', ''],
      ['', ''],
    ]);
    expect(explainWideLines(gone).join('\n')).toMatch(/\b0\s+│\s+0\s+│\s+s1\/1\s+│\s+-\s+│\s+-\s+│/);
  });

  it('prints each decision, every verdict and sample, and every placement with its details', () => {
    const text = explainWideLines(e).join('\n');
    const row = (cells: (string | number)[]): RegExp => new RegExp(cells.map((c) => String(c).replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')).join('\\s+│\\s+'));
    expect(text).toContain('decisions (2):');
    // #, agent, started, finished, placed, conflicts, retries, returns, queued, then the stages.
    expect(text).toMatch(row([0, 'a0', '03:04:05.600', '03:04:05.620', 1, 1, 1, 0, '1200 ms', '0.50 ms', '0.25 ms', '3.00 ms', '4.00 ms']));
    expect(text).toMatch(row([1, 'a1', '03:04:10.600', 'running', 6, 0, 0, 0, '0.00 ms', '1.00 ms', '2.00 ms', '30 ms', '12.5 s']));
    expect(text).toContain('admission verdicts (3):');
    expect(text).toMatch(row([0, 0, 'queue', 1, 9, 2, '0.111', '1500 ms', '4000 ms', '3', '', 'too few free']));
    expect(text).toMatch(row([1, 0, 'admit', 5, 9, 2, '0.556', '', '', '3,4', '5/8 acceptable (≥ 2.5)', 'enough now']));
    expect(text).toMatch(row([2, 1, 'best-effort']));
    expect(text).toContain('sample attempts (3):');
    expect(text).toMatch(row([2, 1, 9, '0.100', 9]));
    expect(text).toContain('placements (2; 5 more not kept in the record):');
    expect(text).toMatch(row([0, 0, 's1/1', 'r3-2xlarge', 'r007', '0.912', '', '', 'yes', '0.950', 0, 41, '']));
    expect(text).toMatch(row([1, 1, 's2/0', 'c4-large', 'r012', '0.610', '0.700', '0.610 (3)', 'no', '0.500', 1, 77, 'preempted low#4']));
  });

  it('leaves the account itself as the default view prints it', () => {
    expect(e.text).not.toContain('decisions (');
    expect(e.text).not.toContain('r3-2xlarge');
    expect(e.text).toContain('task 0 → s1/1  Q = 0.912');
  });

  it('says when a placement suited the job but pushed a neighbour past its tolerance, and only then', () => {
    const sides = (neighboursAcceptable: boolean | undefined) => ({
      selfQ: 0.93,
      neighboursQ: 0.4,
      neighbours: 2,
      ...(neighboursAcceptable === undefined ? {} : { neighboursAcceptable }),
    });
    const rec = record({
      placements: [
        { task: 0, ru: { server: 's1', index: 0 }, Q: 0.93, acceptable: true, score: 0.93, commitRevision: 50, sides: sides(false) },
        { task: 1, ru: { server: 's1', index: 1 }, Q: 0.93, acceptable: true, score: 0.93, commitRevision: 50, sides: sides(true) },
        // A record written before the field: nothing is claimed either way.
        { task: 2, ru: { server: 's2', index: 0 }, Q: 0.93, acceptable: true, score: 0.93, commitRevision: 50, sides: sides(undefined) },
        { task: 3, ru: { server: 's2', index: 1 }, Q: 0.2, acceptable: false, score: 0.2, commitRevision: 50, sides: sides(false) },
      ],
    });
    const x = overTheWire(explanationToProto('j1', 'running', { records: [rec], inProgress: false, updatedAt: T0 }, undefined, '', [], (id) => SERVERS[id]));
    expect(x.placements.map((p) => p.harmsNeighbours)).toEqual([true, false, false, true]);
    const lines = x.text.split('\n');
    const line = (task: number) => lines.find((l) => l.includes(`task ${task} →`)) ?? '';
    expect(line(0)).toContain('(pushes a neighbour past its tolerance)');
    expect(line(1)).not.toContain('tolerance');
    expect(line(2)).not.toContain('tolerance');
    // Unacceptable for the job itself: that is what it says.
    expect(line(3)).toContain('(degrades the job)');
    expect(line(3)).not.toContain('tolerance');
    const wide = explainWideLines(x).join('\n');
    expect(wide.match(/a neighbour past its tolerance/g)?.length).toBe(2);
    // With no resident on the server there is no neighbour to name.
    const alone = overTheWire(
      explanationToProto(
        'j1',
        'running',
        {
          records: [
            record({
              placements: [
                {
                  task: 0,
                  ru: { server: 's1', index: 0 },
                  Q: 0.9,
                  acceptable: true,
                  score: 0.9,
                  commitRevision: 5,
                  sides: { selfQ: 0.9, neighboursQ: 1, neighbours: 0, neighboursAcceptable: true },
                },
              ],
            }),
          ],
          inProgress: false,
          updatedAt: T0,
        },
        undefined,
      ),
    );
    expect(alone.text).toContain('task 0 → s1/0  Q = 0.900 (own 0.900, no residents)');
    expect(line(0)).toContain('(own 0.930, worst of 2 neighbours 0.400)');
  });
});
