/**
 * The owner's plan (src/owner/plan.ts) as tables: what each task gets, what the tasks to
 * place get, what a cancellation does, and when the job record is due, from a job's view and the
 * facts an evaluation gathered, with no store.
 */
import { describe, expect, it } from 'vitest';
import type { JobSpec, TaskState } from '../../src/model/types.ts';
import type { LiveJobRecord, LiveTaskRecord } from '../../src/state/live-records.ts';
import { replaceAfter } from '../../src/state/node-fence.ts';
import type { Feasibility } from '../../src/agent/cell.ts';
import type { PlacedRuRecord } from '../../src/state/records.ts';
import type { TaskView } from '../../src/owner/job.ts';
import {
  ASSUMED_GRACE_MS,
  blockedNote,
  planCancel,
  planGangRepair,
  planJob,
  planQuota,
  planRecord,
  OUTCOMES_PER_WRITE,
  SEEN_REFRESH_MS,
  planTasks,
  planUnplaced,
  PROGRESS_WRITE_MS,
  serversToCheck,
  type Facts,
  type JobView,
  type NodeFact,
} from '../../src/owner/plan.ts';

const NOW = 1_000_000;
/** A job's quota tokens in a namespace other than default: nothing to give back. */
const QUOTA = { returns: new Set<string>(), reconcile: false, settled: false };

function spec(tasks: number): JobSpec {
  return {
    id: 'j',
    name: 'j',
    profile: { name: 'p', vector: [] } as unknown as JobSpec['profile'],
    tasks,
    priority: 0,
    mode: 'incremental',
    locality: { mode: 'any', scope: 'server' },
    constraints: {},
    maxQueueMs: 1000,
    submittedAt: 0,
  };
}

type TaskRow = Partial<LiveTaskRecord> & { state: TaskState };

/** A job of `n` tasks with these task records (index → record), the rest never placed. */
function view(n: number, recs: Record<number, TaskRow>, extra: Partial<JobView> = {}): JobView {
  const tasks = new Map<number, TaskView>();
  const counts = new Map<TaskState, number>();
  for (const [i, r] of Object.entries(recs)) {
    const rec = { job: 'j', index: Number(i), attempt: 0, ...r };
    tasks.set(Number(i), { rec, rev: 10 });
    counts.set(rec.state, (counts.get(rec.state) ?? 0) + 1);
  }
  const rec: LiveJobRecord = { id: 'j', spec: spec(n), state: 'queued', submittedAt: 0, placed: 0 } as unknown as LiveJobRecord;
  return {
    id: 'j',
    spec: spec(n),
    rec,
    tasks,
    counts,
    scheduling: new Set(),
    stopping: new Set(),
    note: undefined,
    blockedSince: undefined,
    summaryAt: Number.NEGATIVE_INFINITY,
    quota: undefined,
    outcomes: { unrecorded: new Map() },
    ...extra,
  };
}

function facts(nodes: Record<string, NodeFact> = {}, f: Partial<Facts> = {}, feasible: Feasibility = { kind: 'ok' }): Facts {
  return {
    now: NOW,
    tasks: [],
    admitted: false,
    nodes: new Map(Object.entries(nodes)),
    registered: (s) => s.startsWith('up-'),
    feasibility: () => feasible,
    unplaceableTimeoutMs: 60_000,
    ...f,
  };
}

const ru = (server: string) => ({ server, index: 0 });

describe('planTasks: one step per task that needs one', () => {
  const rows: { name: string; rec?: TaskRow; nodes?: Record<string, NodeFact>; scheduling?: boolean; want: unknown[] }[] = [
    { name: 'never placed: place it', want: [{ kind: 'place', task: 0 }] },
    { name: 'queued again (preempted): place it', rec: { state: 'queued' }, want: [{ kind: 'place', task: 0 }] },
    { name: 'lost: place it', rec: { state: 'lost', ru: ru('up-1') }, want: [{ kind: 'place', task: 0 }] },
    { name: 'being scheduled: nothing', scheduling: true, want: [] },
    { name: 'running on a registered node: nothing', rec: { state: 'running', ru: ru('up-1') }, want: [] },
    { name: 'succeeded: nothing', rec: { state: 'succeeded' }, want: [] },
    {
      name: "a move's new copy: finish the move",
      rec: { state: 'placed', ru: ru('up-1'), movedFrom: { ru: ru('up-2') } as never },
      want: [{ kind: 'finish-move', task: 0 }],
    },
    {
      name: 'on a node not registered here that the store still has: nothing',
      rec: { state: 'running', ru: ru('n1') },
      nodes: { n1: { kind: 'up' } },
      want: [],
    },
    {
      name: 'on a node that left within its grace: wait for it',
      rec: { state: 'running', ru: ru('n1') },
      nodes: { n1: { kind: 'left', leftAt: NOW - 1000, graceMs: 10_000 } },
      want: [{ kind: 'await-node', task: 0, server: 'n1', due: replaceAfter(NOW - 1000, 10_000) }],
    },
    {
      name: 'on a node that left past its grace: lose the task',
      rec: { state: 'placed', ru: ru('n1') },
      nodes: { n1: { kind: 'left', leftAt: NOW - 600_000, graceMs: 10_000 } },
      want: [{ kind: 'lose', task: 0, why: 'server n1 left the cluster' }],
    },
    {
      name: 'on a node never seen here, found gone just now: wait for the grace its record gives',
      rec: { state: 'running', ru: ru('n1'), nodeGraceMs: 5000 },
      nodes: { n1: { kind: 'unseen', since: NOW } },
      want: [{ kind: 'await-node', task: 0, server: 'n1', due: replaceAfter(NOW, 5000) }],
    },
    {
      name: 'on a node never seen here, no grace recorded: the assumed grace',
      rec: { state: 'running', ru: ru('n1') },
      nodes: { n1: { kind: 'unseen', since: NOW - 1 } },
      want: [{ kind: 'await-node', task: 0, server: 'n1', due: replaceAfter(NOW - 1, ASSUMED_GRACE_MS) }],
    },
  ];
  for (const r of rows) {
    it(r.name, () => {
      const v = view(1, r.rec ? { 0: r.rec } : {}, r.scheduling ? { scheduling: new Set([0]) } : {});
      expect(planTasks(v, [0], facts(r.nodes))).toEqual(r.want);
    });
  }

  it('asks the store only about the nodes of live tasks that are not registered here, each once', () => {
    const v = view(5, {
      0: { state: 'running', ru: ru('n1') },
      1: { state: 'placed', ru: ru('n1') },
      2: { state: 'running', ru: ru('up-1') },
      3: { state: 'lost', ru: ru('n2') },
      4: { state: 'running', ru: ru('n3') },
    });
    expect([...serversToCheck(v, [0, 1, 2, 3], (s) => s.startsWith('up-'))]).toEqual(['n1']);
  });
});

describe('planTasks: a task whose outcome was compacted away', () => {
  const lostOutcome = (rec: TaskRow, nodes: Record<string, NodeFact> = {}) =>
    planTasks(view(1, { 0: rec }, { outcomes: { unrecorded: new Map(), compacted: new Set([0]) } }), [0], facts(nodes));
  it('running: recorded failed', () => {
    expect(lostOutcome({ state: 'running', ru: ru('up-1') })).toEqual([{ kind: 'fail-compacted', task: 0 }]);
  });
  it('on a node gone past its grace: failed, not lost and placed again (it may have finished)', () => {
    expect(lostOutcome({ state: 'placed', ru: ru('n1') }, { n1: { kind: 'left', leftAt: NOW - 600_000, graceMs: 10_000 } })).toEqual([
      { kind: 'fail-compacted', task: 0 },
    ]);
  });
  it('its record moved on meanwhile (the outcome landed): nothing', () => {
    expect(lostOutcome({ state: 'succeeded', ru: ru('up-1') })).toEqual([]);
  });
});

describe('planTasks: a slow task whose wait is over', () => {
  const moves = (over: { slowRev?: number; due?: number; moving?: boolean }) => ({
    heldAfterEnd: new Map(),
    slow: new Map(over.slowRev === undefined ? [] : [[0, { rev: over.slowRev }]]),
    due: new Map(over.due === undefined ? [] : [[0, over.due]]),
    moving: new Set(over.moving ? [0] : []),
  });
  const migratable = { ...spec(1), migratable: true };
  const scaling = { ...spec(1), scaleOut: { maxTasks: 3 } } as JobSpec;
  const full = { ...spec(3), scaleOut: { maxTasks: 3 } } as JobSpec;
  const rows: { name: string; spec: JobSpec; rec: TaskRow; over: Parameters<typeof moves>[0]; want: unknown[] }[] = [
    {
      name: 'migratable, still slow on the report it waited on: move it',
      spec: migratable,
      rec: { state: 'running', ru: ru('up-1') },
      over: { slowRev: 7, due: 7 },
      want: [{ kind: 'move-slow', task: 0, how: 'move' }],
    },
    {
      name: 'a scale-out job below its limit: add a task',
      spec: scaling,
      rec: { state: 'running', ru: ru('up-1') },
      over: { slowRev: 7, due: 7 },
      want: [{ kind: 'move-slow', task: 0, how: 'scale-out' }],
    },
    {
      name: 'a scale-out job at its limit, not migratable: nothing',
      spec: full,
      rec: { state: 'running', ru: ru('up-1') },
      over: { slowRev: 7, due: 7 },
      want: [],
    },
    { name: 'recovered (no report): nothing', spec: migratable, rec: { state: 'running', ru: ru('up-1') }, over: { due: 7 }, want: [] },
    {
      name: 'reported again since (its own wait runs): nothing',
      spec: migratable,
      rec: { state: 'running', ru: ru('up-1') },
      over: { slowRev: 9, due: 7 },
      want: [],
    },
    { name: 'being moved already: nothing', spec: migratable, rec: { state: 'running', ru: ru('up-1') }, over: { slowRev: 7, due: 7, moving: true }, want: [] },
    { name: 'ended meanwhile: nothing', spec: migratable, rec: { state: 'succeeded', ru: ru('up-1') }, over: { slowRev: 7, due: 7 }, want: [] },
    { name: 'not migratable: nothing', spec: spec(1), rec: { state: 'running', ru: ru('up-1') }, over: { slowRev: 7, due: 7 }, want: [] },
  ];
  for (const r of rows) {
    it(r.name, () => {
      const v = view(r.spec.tasks, { 0: r.rec }, { spec: r.spec, moves: moves(r.over) });
      expect(planTasks(v, [0], facts())).toEqual(r.want);
    });
  }
  it('a cancelled job moves nothing: its plan is the cancellation', () => {
    const v = view(1, { 0: { state: 'running', ru: ru('up-1') } }, { spec: migratable, moves: moves({ slowRev: 7, due: 7 }) });
    const plan = planJob({ ...v, rec: { ...v.rec, cancelRequested: true } }, facts({}, { tasks: [0] }));
    expect(plan.tasks).toEqual([]);
    expect(plan.cancel?.stop).toEqual([0]);
  });
});

describe('planUnplaced: scheduled, held, then failed', () => {
  const notNow: Feasibility = { kind: 'not-now', field: 'constraints', reason: 'the servers it may use are down' };
  it('the cell can take the job: schedule', () => {
    expect(planUnplaced(view(1, {}), facts())).toEqual({ kind: 'schedule' });
  });
  it('it cannot now: hold from now, saying when it fails', () => {
    const u = planUnplaced(view(1, {}), facts({}, {}, notNow));
    expect(u).toMatchObject({ kind: 'hold', since: NOW });
    expect(u.kind === 'hold' && u.note).toContain(new Date(NOW + 60_000).toISOString());
  });
  it('held since a while, still within the bound: the hold keeps its start', () => {
    expect(planUnplaced(view(1, {}, { blockedSince: NOW - 59_999 }), facts({}, {}, notNow))).toMatchObject({ kind: 'hold', since: NOW - 59_999 });
  });
  it('held for the whole bound: fail, with the reason', () => {
    expect(planUnplaced(view(1, {}, { blockedSince: NOW - 60_000 }), facts({}, {}, notNow))).toEqual({
      kind: 'fail',
      note: 'the servers it may use are down; gave up after 1 min',
    });
  });
});

describe('planCancel', () => {
  it('stops live tasks, records queued and lost ones cancelled, leaves final, unrecorded and in-flight tasks', () => {
    const v = view(
      7,
      {
        0: { state: 'running', ru: ru('a') },
        1: { state: 'placed', ru: ru('a') },
        2: { state: 'queued' },
        3: { state: 'lost' },
        4: { state: 'succeeded' },
        5: { state: 'running' },
      },
      { stopping: new Set([5]) },
    );
    expect(planCancel(v, [0, 1, 2, 3, 4, 5, 6])).toEqual({ stop: [0, 1], cancel: [2, 3] });
  });
});

describe('planRecord: when the job record is due', () => {
  const base = { state: 'running', placed: 2, taskStates: { running: 2 } } as const;
  const running = (extra: Partial<JobView> = {}, recs: Record<number, TaskRow> = { 0: { state: 'running' }, 1: { state: 'running' } }) => {
    const v = view(2, recs, extra);
    return { ...v, rec: { ...v.rec, ...base }, ...extra };
  };
  it('nothing changed: nothing', () => {
    expect(planRecord(running({ summaryAt: NOW - 1000 }), NOW, true, 'a')).toEqual({ kind: 'none' });
  });
  it('nothing changed, tasks live, the record older than SEEN_REFRESH_MS: written again (its seen revision moves on)', () => {
    expect(planRecord(running({ summaryAt: NOW - SEEN_REFRESH_MS }), NOW, true, 'a')).toMatchObject({
      kind: 'write',
      final: false,
      next: { state: 'running' },
    });
    expect(planRecord(running({ summaryAt: NOW - SEEN_REFRESH_MS }, { 0: { state: 'succeeded' }, 1: { state: 'failed' } }), NOW, true, 'a')).toMatchObject({
      kind: 'write',
      final: true,
    });
  });
  it('an outcome learned from a freed RU and not yet recorded: written like progress', () => {
    const outcomes = { unrecorded: new Map([[0, { t: 0 }]]) };
    expect(planRecord(running({ summaryAt: NOW - 100, outcomes }), NOW, true, 'a')).toEqual({ kind: 'later', waitMs: PROGRESS_WRITE_MS - 100 });
    expect(planRecord(running({ summaryAt: NOW - 1000, outcomes }), NOW, true, 'a')).toMatchObject({ kind: 'write', final: false });
  });
  it('a final job with more outcomes unrecorded than one write takes: those first, the job state as it was', () => {
    const unrecorded = new Map(Array.from({ length: OUTCOMES_PER_WRITE + 1 }, (_, i) => [i, { t: i }] as const));
    const v = running({ summaryAt: NOW - 1000, outcomes: { unrecorded } }, { 0: { state: 'succeeded' }, 1: { state: 'succeeded' } });
    expect(planRecord(v, NOW, true, 'a')).toMatchObject({ kind: 'write', final: false, next: { state: 'running' } });
  });
  it('progress written a moment ago: later, when the interval is over', () => {
    const v = running({ summaryAt: NOW - 100 }, { 0: { state: 'running' }, 1: { state: 'succeeded' } });
    expect(planRecord(v, NOW, true, 'a')).toEqual({ kind: 'later', waitMs: PROGRESS_WRITE_MS - 100 });
  });
  it('progress after the interval: written, with the counts', () => {
    const v = running({ summaryAt: NOW - PROGRESS_WRITE_MS }, { 0: { state: 'running' }, 1: { state: 'succeeded' } });
    expect(planRecord(v, NOW, true, 'a')).toMatchObject({
      kind: 'write',
      final: false,
      next: { state: 'running', taskStates: { running: 1, succeeded: 1 }, owner: 'a' },
    });
  });
  it('a new message is written at once, even right after progress', () => {
    const v = running({ summaryAt: NOW - 1, note: 'server x cannot be reached' });
    expect(planRecord(v, NOW, true, 'a')).toMatchObject({ kind: 'write', next: { message: 'server x cannot be reached' } });
  });
  it('every task succeeded: the final write at once, with the time it finished', () => {
    const v = running({ summaryAt: NOW - 1 }, { 0: { state: 'succeeded' }, 1: { state: 'succeeded' } });
    expect(planRecord(v, NOW, true, 'a')).toMatchObject({ kind: 'write', final: true, next: { state: 'succeeded', finishedAt: NOW } });
  });
  it('final, but a task is still being stopped: nothing yet', () => {
    const v = running({ stopping: new Set([1]) }, { 0: { state: 'succeeded' }, 1: { state: 'cancelled' } });
    expect(planRecord(v, NOW, true, 'a')).toEqual({ kind: 'none' });
  });
  it('final in a namespace with a quota not yet given back: settle the quota first', () => {
    const v = running({ quota: QUOTA }, { 0: { state: 'succeeded' }, 1: { state: 'succeeded' } });
    expect(planRecord(v, NOW, true, 'a')).toEqual({ kind: 'settle-quota' });
  });
  it('a failed task fails the job, quoting the first failure', () => {
    const v = running({}, { 0: { state: 'succeeded' }, 1: { state: 'failed', exitCode: 3 } });
    expect(planRecord(v, NOW, true, 'a')).toMatchObject({
      kind: 'write',
      final: true,
      next: { state: 'failed', message: '1 of 2 tasks failed; task 1: exit code 3' },
    });
  });
  it('a queued job admitted a moment after its submission waits like progress; not admitted, nothing', () => {
    const q = view(2, {}, { summaryAt: NOW - 10 });
    const v = { ...q, rec: { ...q.rec, taskStates: { queued: 2 } } };
    expect(planRecord(v, NOW, true, 'a')).toEqual({ kind: 'later', waitMs: PROGRESS_WRITE_MS - 10 });
    expect(planRecord(v, NOW, false, 'a')).toEqual({ kind: 'none' });
  });
});

describe('planQuota: what the job gives back of its namespace quota', () => {
  const live = { 0: { state: 'running', commitId: 'c0' }, 1: { state: 'placed', commitId: 'c1' }, 2: { state: 'succeeded' } } as const;
  it('nothing ended, nothing to recompute: nothing', () => {
    expect(planQuota(view(3, live, { quota: QUOTA }), true)).toBeUndefined();
  });
  it('placements seen to end: their tokens', () => {
    expect(planQuota(view(3, live, { quota: { ...QUOTA, returns: new Set(['2/c2']) } }), true)).toEqual({ drop: new Set(['2/c2']) });
  });
  it('adopted: the tokens of the live tasks, once no scheduling call is in flight', () => {
    expect(planQuota(view(3, live, { quota: { ...QUOTA, reconcile: true } }), true)).toEqual({ keep: new Set(['0/c0', '1/c1']), add: ['0/c0', '1/c1'] });
    expect(planQuota(view(3, live, { quota: { ...QUOTA, reconcile: true }, scheduling: new Set([2]) }), true)).toBeUndefined();
  });
  it('final: all of them, once', () => {
    const done = { 0: { state: 'succeeded' }, 1: { state: 'failed' } } as const;
    expect(planQuota(view(2, done, { quota: { ...QUOTA, returns: new Set(['0/c0']) } }), true)).toEqual({ all: true });
    expect(planQuota(view(2, done, { quota: { ...QUOTA, settled: true } }), true)).toBeUndefined();
  });
});

describe('planGangRepair: a gang left half-reserved, all or nothing', () => {
  const placed = { 0: { state: 'placed', ru: ru('a') }, 1: { state: 'placed', ru: ru('b') } } as const;
  const rec = (task: number, state: 'busy' | 'reserved', job = 'j') => ({ job, task, state }) as unknown as PlacedRuRecord;
  it('every RU still reserved: give them all back', () => {
    expect(
      planGangRepair(view(2, placed), [
        { task: 0, ru: rec(0, 'reserved') },
        { task: 1, ru: rec(1, 'reserved') },
      ]),
    ).toEqual({ confirm: false, held: [0, 1] });
  });
  it('one RU already busy: confirm the rest', () => {
    expect(
      planGangRepair(view(2, placed), [
        { task: 0, ru: rec(0, 'busy') },
        { task: 1, ru: rec(1, 'reserved') },
      ]),
    ).toEqual({ confirm: true, held: [1] });
  });
  it('a task of the gang ran: confirm the rest', () => {
    const v = view(3, { ...placed, 2: { state: 'succeeded' } });
    expect(planGangRepair(v, [{ task: 0, ru: rec(0, 'reserved') }])).toEqual({ confirm: true, held: [0] });
  });
  it("an RU gone or holding another job's task is not the gang's to settle", () => {
    expect(
      planGangRepair(view(2, placed), [
        { task: 0, ru: undefined },
        { task: 1, ru: rec(1, 'reserved', 'other') },
      ]),
    ).toEqual({ confirm: false, held: [] });
  });
});

describe("planJob: one evaluation's plan, in the order it is applied", () => {
  const gangRec = (task: number) => ({ job: 'j', task, state: 'reserved' }) as unknown as PlacedRuRecord;
  const rows: { name: string; v: JobView; f: Partial<Facts>; feasible?: Feasibility; want: Record<string, unknown> }[] = [
    {
      name: 'changed tasks: their steps; one to place: what the tasks to place get',
      v: view(3, { 0: { state: 'running', ru: ru('up-a') }, 1: { state: 'queued' } }),
      f: { tasks: [0, 1] },
      want: { tasks: [{ kind: 'place', task: 1 }], unplaced: { kind: 'schedule' } },
    },
    {
      name: 'nothing to place: the cell is not asked',
      v: view(2, { 0: { state: 'running', ru: ru('gone') } }),
      f: { tasks: [0], nodes: new Map([['gone', { kind: 'left', leftAt: NOW, graceMs: 60_000 }]]) },
      feasible: { kind: 'never', reason: 'must not be asked' } as unknown as Feasibility,
      want: { tasks: [{ kind: 'await-node', task: 0, server: 'gone', due: replaceAfter(NOW, 60_000) }] },
    },
    {
      name: 'a task to record lost is placed again: what the tasks to place get is planned too',
      v: view(1, { 0: { state: 'running', ru: ru('gone') } }),
      f: { tasks: [0], nodes: new Map([['gone', { kind: 'left', leftAt: NOW - 3_600_000, graceMs: 0 }]]) },
      feasible: { kind: 'not-now', reason: 'no server is up' } as unknown as Feasibility,
      want: {
        tasks: [{ kind: 'lose', task: 0, why: 'server gone left the cluster' }],
        unplaced: { kind: 'hold', since: NOW, note: blockedNote(60_000, 'no server is up', NOW) },
      },
    },
    {
      name: 'quota tokens to give back come first, with the rest of the plan',
      v: view(2, { 0: { state: 'succeeded' }, 1: { state: 'queued' } }, { quota: { ...QUOTA, returns: new Set(['0/c1']) } }),
      f: { tasks: [1] },
      want: { quota: { drop: new Set(['0/c1']) }, tasks: [{ kind: 'place', task: 1 }], unplaced: { kind: 'schedule' } },
    },
    {
      name: 'a half-done gang is settled alone: the changed tasks are not planned',
      v: view(2, { 0: { state: 'placed', ru: ru('a') }, 1: { state: 'queued' } }),
      f: { tasks: [1], gang: [{ task: 0, ru: gangRec(0) }] },
      want: { gang: { confirm: false, held: [0] }, tasks: [] },
    },
    {
      name: 'cancelled while its scheduling call runs: the call aborted, live tasks stopped, queued ones recorded',
      v: view(3, { 0: { state: 'running', ru: ru('up-a') }, 1: { state: 'queued' } }, { scheduling: new Set([2]) }),
      f: { tasks: [0, 1, 2] },
      want: { cancel: { abort: true, stop: [0], cancel: [1] }, tasks: [] },
    },
  ];
  for (const r of rows) {
    it(r.name, () => {
      const v = r.name.startsWith('cancelled') ? { ...r.v, rec: { ...r.v.rec, cancelRequested: true } } : r.v;
      const plan = planJob(v, facts({}, r.f, r.feasible));
      expect(plan).toEqual(r.want);
    });
  }
});
