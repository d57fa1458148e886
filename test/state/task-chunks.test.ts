/**
 * The chunk records a placement writes for the tasks it starts (src/state/task-chunks.ts): one
 * per block of tasks it touches, read back as each task's record while the task has none of its
 * own, and never in place of a newer record of its own.
 */
import { describe, expect, it } from 'vitest';
import { Keys } from '../../src/state/keys.ts';
import { LiveKeys } from '../../src/state/live-records.ts';
import { placementTxn } from '../../src/state/placement.ts';
import { blockEntries, blockPrefix, chunkFirst, chunkJob, chunkKeyOf, entryRecord, latestTasks, TASK_BLOCK, tasksAsRead } from '../../src/state/task-chunks.ts';
import type { KeyValue } from '../../src/store/types.ts';
import { makeJob, TEST_PROFILES } from '../support/jobs.ts';

const keys = new Keys('/c/');
const live = new LiveKeys(keys);
const kv = (key: string, value: unknown, rev: number): KeyValue => ({
  key,
  value: JSON.stringify(value),
  createRevision: rev,
  modRevision: rev,
  version: 1,
  lease: '0',
});

function txnFor(tasks: number[], opts: { attempt?: number; unsure?: boolean } = {}) {
  const job = makeJob('j', TEST_PROFILES[0]!, TASK_BLOCK * 2);
  return placementTxn({
    keys,
    agent: 'a1',
    commitId: 'c1',
    now: 1000,
    job,
    scope: 'ru',
    ruState: 'busy',
    items: tasks.map((t, i) => ({
      ref: { server: `s${i}`, index: 0 },
      task: t,
      attempt: opts.attempt ?? 0,
      ruRev: 5,
      basedOn: 5,
      taskRev: 0,
      ...(opts.unsure ? { unsureChunk: keys.taskChunk('j', t) } : {}),
    })),
  });
}

const puts = (t: ReturnType<typeof txnFor>): string[] =>
  t.req.success.filter((op) => op.type === 'put' && op.key.startsWith(keys.allTasks())).map((op) => op.key);

describe('task chunk records', () => {
  it.each([
    { name: 'tasks of one block: one chunk record, keyed by the first task, no task record', tasks: [3, 4, 5], want: [keys.taskChunk('j', 3)] },
    {
      name: 'tasks across a block boundary: one chunk per block',
      tasks: [TASK_BLOCK - 1, TASK_BLOCK, TASK_BLOCK + 1],
      want: [keys.taskChunk('j', TASK_BLOCK - 1), keys.taskChunk('j', TASK_BLOCK)],
    },
  ])('$name', ({ tasks, want }) => {
    const t = txnFor(tasks);
    expect(puts(t)).toEqual(want);
    expect(t.startRecorded).toEqual(tasks.map(() => true));
    for (const key of want) expect(key.startsWith(blockPrefix(keys, 'j', Math.floor((chunkFirst(key) ?? -1) / TASK_BLOCK)))).toBe(true);
    expect(chunkKeyOf(keys, 'j', tasks[tasks.length - 1]!, tasks)).toBe(want[want.length - 1]);
  });

  it.each([
    { name: 'a task placed again', opts: { attempt: 1 } },
    { name: 'a task of a commit whose answer was lost', opts: { unsure: true } },
  ])('$name writes its own record `placed`, and no chunk', ({ opts }) => {
    const t = txnFor([7], opts);
    expect(puts(t)).toEqual([keys.task('j', 7)]);
    expect(t.startRecorded).toEqual([false]);
    if (opts.unsure) expect(t.req.compare).toContainEqual({ key: keys.taskChunk('j', 7), target: 'version', op: '==', value: 0 });
  });

  it('a chunk key is not a task key, and names its job and first task', () => {
    expect(live.parseTask(keys.taskChunk('ns/j', 12))).toBeUndefined();
    expect(chunkJob(keys, keys.taskChunk('ns/j', 12))).toBe('ns/j');
    expect(chunkFirst(keys.taskChunk('ns/j', 12))).toBe(12);
    expect(chunkJob(keys, keys.task('ns/j', 12))).toBeUndefined();
  });

  it("reads back each task's record: the chunk's while the task has none, its own once written after", () => {
    const chunk = kv(
      keys.taskChunk('j', 0),
      { commitId: 'c1', agent: 'a1', at: 1000, tasks: [0, 1, 2].map((t) => ({ t, ru: { server: 's', index: t }, b: 4 })) },
      10,
    );
    const ended = kv(keys.task('j', 1), { job: 'j', index: 1, state: 'succeeded', attempt: 0, commitId: 'c1' }, 20);
    const older = kv(keys.task('j', 2), { job: 'j', index: 2, state: 'lost', attempt: 0 }, 5);
    const read = tasksAsRead(keys, [chunk, ended, older], (k) => live.parseTask(k));
    expect(read.get(0)).toMatchObject({
      implied: true,
      rev: 10,
      rec: { state: 'running', ru: { server: 's', index: 0 }, placedRevision: 10, commitId: 'c1', attempt: 0 },
    });
    expect(read.get(1)).toMatchObject({ implied: false, rev: 20, rec: { state: 'succeeded' } });
    expect(read.get(2)).toMatchObject({ implied: true, rev: 10 });
    const entries = blockEntries(keys, [chunk, ended, older], (k) => live.parseTask(k));
    expect([...entries.keys()].sort()).toEqual([0, 1, 2]);
    expect(entryRecord(entries.get(1)!)?.state).toBe('succeeded');
    expect(entryRecord(entries.get(2)!)?.state).toBe('running');
    expect([...latestTasks(keys, [chunk, ended, older]).entries()].map(([id, t]) => `${id}:${t.state}`).sort()).toEqual([
      'j#0:running',
      'j#1:succeeded',
      'j#2:running',
    ]);
  });
});
