/**
 * jobReason (owner/reason.ts) over records and cell summaries built here: which reason wins
 * when several hold, and the sentence and fields of each; and the folding of repeated sample
 * attempts and verdicts in `explain` and `explain -o wide`.
 */
import { describe, expect, it } from 'vitest';
import { jobReason, type CellSummary, type ReasonInput } from '../../src/owner/reason.ts';
import { explainWideLines } from '../../src/cli/explain-view.ts';
import { explanationToProto, sampleRuns } from '../../src/frontend/convert.ts';
import type { Explanation__Output } from '../../src/rpc/gen/tarcil/v1/Explanation.ts';
import type { DecisionRecord } from '../../src/state/decisions.ts';
import type { LiveJobRecord } from '../../src/state/live-records.ts';
import { foldRuns } from '../../src/util/fold-runs.ts';

const T0 = 1_700_000_000_000;

function rec(over: Partial<LiveJobRecord> & { tasks?: number; mode?: 'gang' | 'incremental' } = {}): LiveJobRecord {
  const { tasks = 10, mode = 'incremental', ...rest } = over;
  return {
    spec: {
      id: 'j-1',
      name: 'job',
      profile: { name: 'spark-lr' },
      tasks,
      priority: 100,
      mode,
      locality: { mode: 'any', scope: 'server' },
      constraints: {},
      maxQueueMs: 60_000,
    } as unknown as LiveJobRecord['spec'],
    state: 'queued',
    placed: 0,
    updatedAt: T0,
    submittedAt: T0,
    ...rest,
  };
}

function decision(over: Partial<DecisionRecord> = {}): DecisionRecord {
  return {
    job: 'j-1',
    agent: 'a0',
    target: 0.8,
    admission: [],
    samples: [],
    placements: [],
    conflicts: 0,
    retries: 0,
    readmissions: 0,
    queuedMs: 0,
    stageMs: { admission: 0, size: 0, select: 0, commit: 0, queue: 0 },
    startedAt: T0,
    ...over,
  };
}

function cell(over: Partial<CellSummary> = {}): CellSummary {
  return {
    servers: 10,
    matching: 10,
    matchingUp: 10,
    cordoned: [],
    usable: 24,
    busy: 24,
    holders: [
      { job: 'a', rus: 14 },
      { job: 'b', rus: 10 },
    ],
    ...over,
  };
}

const reason = (o: Partial<ReasonInput>): ReturnType<typeof jobReason> => jobReason({ jobId: 'j-1', rec: rec(), decisions: [], now: T0 + 625_000, ...o });

describe('jobReason', () => {
  it('a full cell: N of M busy, the holders, what the job needs, the estimated wait and its bound', () => {
    const verdict = {
      action: 'queue' as const,
      reason: '',
      buckets: [],
      acceptableFree: 0,
      totalFree: 0,
      needed: 30,
      f: 0,
      estimateMs: 12_000,
      boundMs: 30_000,
    };
    const r = reason({
      rec: rec({ tasks: 30, mode: 'gang' }),
      cell: cell({ usable: 40, busy: 40 }),
      decisions: [decision({ admission: [verdict] })],
      now: T0 + 5_000,
    });
    expect(r.kind).toBe('cell-full');
    expect(r.text).toBe(
      'the cell is full: 40 of 40 RUs it may use are busy, held by jobs a (14), b (10); it needs 30 at once; estimated wait 12.0 s (bound 30.0 s)',
    );
    expect([r.rusBusy, r.rusUsable, r.needed, r.estimateMs, r.boundMs, r.waitedMs]).toEqual([40, 40, 30, 12_000, 30_000, 5_000]);
    expect(r.holders).toEqual([
      { job: 'a', rus: 14 },
      { job: 'b', rus: 10 },
    ]);
  });

  it('an estimate the job has waited past is said as passed, not as the wait ahead', () => {
    const verdict = {
      action: 'queue' as const,
      reason: '',
      buckets: [],
      acceptableFree: 0,
      totalFree: 0,
      needed: 30,
      f: 0,
      estimateMs: 12_000,
      boundMs: 30_000,
    };
    const r = reason({ rec: rec({ tasks: 30, mode: 'gang' }), cell: cell({ usable: 40, busy: 40 }), decisions: [decision({ admission: [verdict] })] });
    expect(r.text).toBe(
      "the cell is full: 40 of 40 RUs it may use are busy, held by jobs a (14), b (10); it needs 30 at once; waited 10.4 min, past admission's estimate of 12.0 s (bound 30.0 s)",
    );
    expect([r.estimateMs, r.boundMs, r.waitedMs]).toEqual([12_000, 30_000, 625_000]);
  });

  it('a gang with some RUs free but fewer than it needs, and holders past the first five', () => {
    const holders = ['a', 'b', 'c', 'd', 'e', 'f', 'g'].map((job, i) => ({ job, rus: 7 - i }));
    const r = reason({ rec: rec({ tasks: 10, mode: 'gang' }), cell: cell({ usable: 32, busy: 28, holders }) });
    expect(r.kind).toBe('cell-full');
    expect(r.text).toBe(
      'the cell has too few free RUs: 28 of 32 RUs it may use are busy, held by jobs a (7), b (6), c (5), d (4), e (3) and 2 more jobs; it needs 10 at once and 4 are free',
    );
    expect(r.holders.length).toBe(5);
  });

  it('an incremental job partly placed in a full cell names itself among the holders', () => {
    const r = reason({
      rec: rec({ tasks: 24, placed: 20, state: 'running', taskStates: { running: 20, queued: 4 } }),
      cell: cell({
        holders: [
          { job: 'j-1', rus: 20 },
          { job: 'b', rus: 4 },
        ],
      }),
    });
    expect(r.kind).toBe('cell-full');
    expect(r.text).toBe(
      'the cell is full: 24 of 24 RUs it may use are busy, held by jobs this job (20), b (4); 20 of its 24 tasks placed, 4 tasks wait for one',
    );
  });

  it('a namespace at its quota comes before a full cell', () => {
    const r = reason({ rec: rec({ tasks: 3 }), cell: cell(), quota: { namespace: 'team', used: 8, limit: 8 } });
    expect(r.kind).toBe('quota');
    expect([r.namespace, r.quotaUsed, r.quotaLimit]).toEqual(['team', 8, 8]);
    expect(r.text).toBe('namespace team is at its quota: 8 of 8 RUs in use; 3 tasks wait for an RU of the quota');
    // Room left in the quota: the cell is what holds it.
    expect(reason({ rec: rec({ tasks: 3 }), cell: cell(), quota: { namespace: 'team', used: 2, limit: 8 } }).kind).toBe('cell-full');
  });

  it('no server it may use is up, none meets its constraints, or all are cordoned', () => {
    const constrained = rec();
    constrained.spec.constraints = { platforms: ['r3-xlarge'], attributes: { zone: 'b' } };
    const down = reason({ rec: constrained, cell: cell({ matching: 2, matchingUp: 0, usable: 0, busy: 0, holders: [] }) });
    expect(down.kind).toBe('constraint');
    expect(down.constraint).toBe('platform r3-xlarge, zone=b');
    expect(down.text).toBe('no server it may use is up: platform r3-xlarge, zone=b is met by 2 servers, all down');
    const none = reason({ rec: constrained, cell: cell({ matching: 0, matchingUp: 0, usable: 0, busy: 0, holders: [] }) });
    expect(none.text).toBe('no server meets its constraints: platform r3-xlarge, zone=b is met by none of the 10 servers of the cell');
    const cordoned = reason({ rec: constrained, cell: cell({ matching: 2, matchingUp: 2, cordoned: ['s8', 's9'], usable: 0, busy: 0, holders: [] }) });
    expect(cordoned.kind).toBe('cordoned');
    expect(cordoned.servers).toEqual(['s8', 's9']);
    const gang = reason({ rec: rec({ tasks: 30, mode: 'gang' }), cell: cell({ matching: 10, matchingUp: 8, cordoned: ['s7'], usable: 18, busy: 0 }) });
    expect(gang.kind).toBe('constraint');
    expect(gang.text).toBe('a gang of 30 needs 30 RUs at once and only 18 it may use are up (1 server cordoned, 2 servers down)');
  });

  it("admission's hold while RUs are free: which buckets, how many would run it well", () => {
    const verdict = {
      action: 'queue' as const,
      reason: 'too few acceptable',
      buckets: [2, 5],
      acceptableFree: 1,
      totalFree: 8,
      needed: 4,
      f: 0.125,
      estimateMs: 1500,
      boundMs: 4000,
    };
    const live = decision({
      admission: [verdict],
      waiting: 'queued by admission control until enough free RUs would run it well (at most 60000 ms; see explain)',
    });
    const r = reason({ rec: rec({ tasks: 4, mode: 'gang' }), cell: cell({ busy: 16 }), decisions: [live], now: T0 + 1_000 });
    expect(r.kind).toBe('admission');
    expect(r.buckets).toEqual([2, 5]);
    expect(r.text).toBe(
      'admission control holds it: 1 of 8 free RUs would run it well (buckets 2, 5), it needs 4; estimated wait 1.5 s (bound 4.0 s); it waits at most 1.0 min',
    );
  });

  it('free RUs and no hold: what the record says, with the attempts so far', () => {
    const live = decision({ waiting: 'waiting for a free RU it may use', samples: Array.from({ length: 60 }, () => ({ R: 32, f: 0, candidates: 0 })) });
    const r = reason({ cell: cell({ busy: 21 }), decisions: [live] });
    expect(r.kind).toBe('waiting');
    expect(r.attempts).toBe(60);
    expect(r.text).toBe('waiting: 3 of 24 RUs it may use are free, waiting for a free RU it may use (60 sample attempts so far)');
    expect(reason({ rec: rec({ message: 'no server it may use is up now' }) }).text).toBe('waiting: no server it may use is up now');
    expect(reason({ cell: cell({ busy: 0 }) })).toMatchObject({
      kind: 'waiting',
      text: 'waiting for its first scheduling call: 24 of 24 RUs it may use are free',
    });
  });

  it('placed, running and done', () => {
    expect(reason({ rec: rec({ placed: 10, state: 'placed', taskStates: { placed: 10 } }) })).toMatchObject({
      kind: 'placing',
      text: 'placed: all 10 tasks placed, starting on their nodes',
    });
    expect(reason({ rec: rec({ placed: 10, state: 'running', taskStates: { running: 7, succeeded: 3 } }) })).toMatchObject({
      kind: 'running',
      text: 'running: 7 of 10 tasks running, 3 ended',
    });
    expect(reason({ rec: rec({ placed: 10, state: 'succeeded', taskStates: { succeeded: 10 } }) })).toMatchObject({
      kind: 'done',
      text: 'done: succeeded, all 10 tasks ended well',
    });
    expect(reason({ rec: rec({ state: 'failed', message: '2 of 10 tasks failed' }) })).toMatchObject({
      kind: 'done',
      text: 'done: failed — 2 of 10 tasks failed',
    });
    // A final job's reason reads no cell.
    expect(reason({ rec: rec({ state: 'cancelled' }), cell: cell() }).rusUsable).toBe(0);
  });
});

describe('repeated attempts fold into one line with a count', () => {
  const samples = [...Array.from({ length: 60 }, () => ({ R: 32, f: 0, candidates: 0 })), { R: 16, f: 0.5, candidates: 8 }];

  it('foldRuns keeps the order and counts each run', () => {
    expect(foldRuns([1, 1, 2, 1, 1, 1], String).map((r) => [r.item, r.count, r.first])).toEqual([
      [1, 2, 0],
      [2, 1, 2],
      [1, 3, 3],
    ]);
  });

  it('explain: "R=32, f=0.000, 0 candidates ×60"', () => {
    const e = explanationToProto('j-1', 'queued', { records: [decision({ samples })], inProgress: true, updatedAt: T0 }, undefined);
    expect(e.text).toContain('sampling: 61 attempt(s), 8 candidates seen: R=32, f=0.000, 0 candidates ×60; R=16, f=0.500, 8 candidates');
    expect(sampleRuns(Array.from({ length: 8 }, (_, i) => ({ r: i, f: 0, candidates: 0 })))).toMatch(/^\(2 earlier run\(s\) of attempts not shown\) R=2,/);
  });

  it('explain -o wide: one row per run, with the range of attempts and the count', () => {
    const verdict = { action: 'queue' as const, reason: 'wait', buckets: [1], acceptableFree: 0, totalFree: 0, needed: 3, f: 0 };
    const admission = [1000, 900, 800].map((estimateMs) => ({ ...verdict, estimateMs, boundMs: 2 * estimateMs }));
    const e = explanationToProto(
      'j-1',
      'queued',
      { records: [decision({ samples, admission })], inProgress: true, updatedAt: T0 },
      undefined,
    ) as unknown as Explanation__Output;
    const text = explainWideLines({ ...e, admission: e.admission.map((v) => ({ ...v, sampled: null })) }).join('\n');
    expect(text).toMatch(/0-59\s+│\s+0\s+│\s+32\s+│\s+0\.000\s+│\s+0\s+│\s+×60/);
    expect(text).toMatch(/60\s+│\s+0\s+│\s+16\s+│\s+0\.500\s+│\s+8\s+│\s+│/);
    // Verdicts that differ only in their estimate: one row, with the latest estimate.
    expect(text).toMatch(/0-2\s+│\s+0\s+│\s+queue\s+│.*800 ms\s+│\s+1600 ms.*×3/);
  });
});
