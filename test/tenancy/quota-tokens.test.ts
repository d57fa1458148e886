/**
 * Which allotment tokens the job owner gives back as it sees task records change (mergeTask), and
 * how a job's tokens are changed in the usage record.
 */
import { describe, expect, it } from 'vitest';
import type { SchedulingAgent } from '../../src/agent/agent.ts';
import { forgetTask, mergeTask, newOwned } from '../../src/owner/job.ts';
import type { JobSpec } from '../../src/model/types.ts';
import type { LiveJobRecord, LiveTaskRecord } from '../../src/state/live-records.ts';
import { changeJobTokens } from '../../src/tenancy/quota.ts';

const owned = (id: string) => {
  const spec = { id, tasks: 2 } as JobSpec;
  return newOwned(spec, undefined as unknown as SchedulingAgent, { spec, state: 'queued', placed: 0, updatedAt: 0 } as LiveJobRecord, 1, new Map());
};
const rec = (state: LiveTaskRecord['state'], commitId?: string, extra: Partial<LiveTaskRecord> = {}): LiveTaskRecord => ({
  job: 'ns/j-1',
  index: 0,
  state,
  attempt: 0,
  ru: { server: 's', index: 0 },
  ...(commitId ? { commitId } : {}),
  ...extra,
});

describe('quota tokens given back by the owner', () => {
  it('a placement that runs and ends gives its token back once', () => {
    const o = owned('ns/j-1');
    mergeTask(o, 0, rec('placed', 'a:1'), 10);
    mergeTask(o, 0, rec('running', 'a:1'), 11);
    expect([...(o.quota?.returns ?? [])]).toEqual([]);
    mergeTask(o, 0, rec('succeeded', 'a:1'), 12);
    expect([...(o.quota?.returns ?? [])]).toEqual(['0/a:1']);
  });

  it('lost, preempted (queued again) and a gang reservation given back each return the ended placement', () => {
    const o = owned('ns/j-1');
    mergeTask(o, 0, rec('running', 'a:1'), 10);
    mergeTask(o, 0, rec('lost', 'a:1'), 11);
    mergeTask(o, 0, rec('placed', 'a:2'), 12);
    mergeTask(o, 0, { job: 'ns/j-1', index: 0, state: 'queued', attempt: 1 }, 13);
    mergeTask(o, 1, rec('placed', 'a:3', { index: 1 }), 14);
    forgetTask(o, 1);
    expect([...(o.quota?.returns ?? [])].sort()).toEqual(['0/a:1', '0/a:2', '1/a:3']);
  });

  it('a move gives back the old copy only once the new copy no longer waits for it', () => {
    const o = owned('ns/j-1');
    mergeTask(o, 0, rec('running', 'a:1'), 10);
    mergeTask(o, 0, rec('placed', 'b:1', { movedFrom: { server: 's', index: 0, commitId: 'a:1' } }), 11);
    expect([...(o.quota?.returns ?? [])]).toEqual([]);
    mergeTask(o, 0, rec('running', 'b:1'), 12);
    expect([...(o.quota?.returns ?? [])]).toEqual(['0/a:1']);
  });

  it('a job of default collects nothing', () => {
    const o = owned('j-1');
    mergeTask(o, 0, rec('running', 'a:1', { job: 'j-1' }), 10);
    mergeTask(o, 0, rec('succeeded', 'a:1', { job: 'j-1' }), 11);
    expect(o.quota).toBeUndefined();
  });
});

describe('changing a job tokens', () => {
  const u = { total: 5, jobs: { 'ns/a': ['0/x', '1/x'], 'ns/b': ['0/y', '1/y', '2/y'] } };
  it('drops given tokens, idempotently, and removes the job when none is left', () => {
    expect(changeJobTokens(u, 'ns/a', { drop: new Set(['0/x', '9/z']) })).toEqual({ total: 4, jobs: { 'ns/a': ['1/x'], 'ns/b': ['0/y', '1/y', '2/y'] } });
    expect(changeJobTokens(u, 'ns/a', { drop: new Set(['9/z']) })).toBeUndefined();
    expect(changeJobTokens(u, 'ns/a', { all: true })).toEqual({ total: 3, jobs: { 'ns/b': ['0/y', '1/y', '2/y'] } });
  });
  it('recomputes a job from its live tokens (keep and add)', () => {
    const live = ['1/x', '2/x'];
    expect(changeJobTokens(u, 'ns/a', { keep: new Set(live), add: live })).toEqual({
      total: 5,
      jobs: { 'ns/a': ['1/x', '2/x'], 'ns/b': ['0/y', '1/y', '2/y'] },
    });
  });
});
