/**
 * The dashboard's nodes and logs views on the server side, and the page's pure parts: the nodes
 * (`/api/nodes`: each server's RUs, tasks with since when, state and load verdict) and a task's
 * logs (`/api/logs`: the Scheduler's TaskLogs relayed as lines of JSON, its errors said, a bad
 * request named by its field) on a front-end and monitors in this process; the job page's
 * folding of repeated rows, its fallback reason, and the charts' gaps.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadVerdict, type NodeView } from '../../src/frontend/dashboard/nodes.ts';
import type { SchedulerClient } from '../../src/rpc/gen/tarcil/v1/Scheduler.ts';
import type { Keys } from '../../src/state/keys.ts';
import { LiveKeys } from '../../src/state/live-records.ts';
import type { MemoryStore } from '../../src/store/memory.ts';
import { currentReason, foldAdmission, foldEvents, foldRuns, foldSamples, span } from '../../web/dashboard/fold.js';
import { columns } from '../../web/dashboard/series.js';
import { getJob, submit, waitFinal } from '../support/live.ts';
import { startMixedCell, type MixedCell } from '../support/mixed-cell.ts';

describe("the job page's folding, reason and charts (web/dashboard)", () => {
  it('folds runs of the same sample attempt into one line with its count and span, and keeps different ones apart', () => {
    const same = { r: 32, f: 0, candidates: 0 };
    const samples = [
      { r: 8, f: 0.5, candidates: 8 },
      ...Array.from({ length: 60 }, () => ({ ...same })),
      { r: 32, f: 0.0004, candidates: 0 },
      { r: 16, f: 0.1, candidates: 3 },
    ];
    const g = foldSamples(samples);
    // f is compared to 3 decimals: 0.0004 is the same attempt as 0.
    expect(g.map((x) => x.count)).toEqual([1, 61, 1]);
    expect(g[1]).toMatchObject({ first: 1, last: 61 });
    expect(span(g[1]!, 'attempt')).toBe('attempts 2–62');
    expect(span(g[0]!, 'attempt')).toBe('attempt 1');
    // Runs only: the same row after another is a new line.
    expect(foldRuns(['a', 'b', 'a', 'a'], (x) => x).map((x) => x.count)).toEqual([1, 1, 2]);
  });

  it('folds admission verdicts that differ only in their numbers, keeping the latest', () => {
    const v = (action: string, n: number) => ({ action, reason: `only 0 of 0 free RUs are acceptable; 13 more expected free within ${n}.${n} s (p=0.9)` });
    const g = foldAdmission([v('queue', 1), v('queue', 2), v('best-effort', 3), v('best-effort', 4), v('best-effort', 5)]);
    expect(g.map((x) => [x.item.action, x.count])).toEqual([
      ['queue', 2],
      ['best-effort', 3],
    ]);
    expect(g[1]!.item.reason).toContain('5.5 s');
    expect(
      foldEvents([
        { state: 'queued', tasks: '', message: 'm' },
        { state: 'queued', tasks: '', message: 'm' },
      ])[0]!.count,
    ).toBe(2);
  });

  it("takes the front-end's reason when there is one, and says one from the state otherwise", () => {
    expect(currentReason({ reason: { kind: 'cell-full', text: 'the cell is full' } }, { state: 'queued' })).toEqual({
      kind: 'cell-full',
      text: 'the cell is full',
    });
    expect(currentReason({ waitingFor: 'no server it may use is up' }, { state: 'queued', tasks: 4, taskStates: { queued: 4 } })).toMatchObject({
      kind: 'waiting',
      text: 'Waiting: no server it may use is up.',
    });
    expect(
      currentReason({ admission: [{ action: 'queue', reason: 'too few acceptable RUs' }] }, { state: 'admitted', tasks: 2, taskStates: { queued: 2 } }),
    ).toMatchObject({ kind: 'admission' });
    expect(currentReason(undefined, { state: 'succeeded', tasks: 3, taskStates: { succeeded: 3 } })).toMatchObject({
      kind: 'done',
      text: 'Succeeded: all 3 tasks finished.',
    });
    expect(currentReason(undefined, { state: 'running', tasks: 3, taskStates: { running: 3 } })).toMatchObject({ kind: 'running' });
  });

  it('leaves a gap in a chart where a point has no value or where seconds have no point', () => {
    const pts = [
      { t: 1000, p50: 5 },
      { t: 2000, p50: null },
      { t: 3000, p50: 7 },
      // 90 s with no point: not joined by a line.
      { t: 93_000, p50: 9 },
    ];
    const [t, p50] = columns(pts, ['p50']);
    expect(p50).toEqual([5, null, 7, null, 9]);
    expect(t).toEqual([1, 2, 3, 4, 93]);
  });
});

describe('the load verdict', () => {
  it('says ok, the slow tasks, or that the monitor blocked the server, slowest first', () => {
    expect(loadVerdict(false, [])).toBe('ok');
    const r = (task: number, rate: number) => ({ job: 'j1', task, server: 's', rate, at: 0 });
    expect(loadVerdict(false, [r(1, 0.5)])).toBe('slow: task 1 of j1 at 50% of the expected rate');
    expect(loadVerdict(true, [r(1, 0.5), r(2, 0.25)])).toBe('blocked: task 2 of j1 at 25%, task 1 of j1 at 50% of the expected rate');
    expect(loadVerdict(true, [])).toBe('blocked: a task ran well below its expected rate');
  });
});

describe('the nodes and logs views', () => {
  let cell: MixedCell;
  let store: MemoryStore;
  let keys: Keys;
  let c: SchedulerClient;
  let base: string;

  beforeAll(async () => {
    cell = await startMixedCell({ name: 'dv', prefix: '/dash-views/', seed: 3, simRack: 'r1', simRus: 3, httpPort: 0 });
    ({ store, keys, client: c } = cell);
    base = `http://127.0.0.1:${cell.sched.httpPort}`;
  });
  afterAll(async () => {
    await cell?.close();
  });

  const nodes = async (): Promise<NodeView[]> => (await (await fetch(`${base}/api/nodes`)).json()) as NodeView[];
  const logs = async (q: string): Promise<{ status: number; lines: Record<string, unknown>[]; text: string }> => {
    const r = await fetch(`${base}/api/logs?${q}`);
    const text = await r.text();
    return {
      status: r.status,
      text,
      lines:
        r.status === 200
          ? text
              .trim()
              .split('\n')
              .map((l) => JSON.parse(l) as Record<string, unknown>)
          : [],
    };
  };

  it('lists every node with its RUs, its tasks since when, its state and its load verdict', async () => {
    const before = Date.now();
    const { jobId } = await submit(c, {
      specJson: JSON.stringify({ name: 'hold', profile: 'spark-lr', tasks: 2, durationMs: 600_000, constraints: { attributes: { exec: 'simulated' } } }),
    });
    let view: NodeView[] = [];
    await expect.poll(async () => (view = await nodes()).find((n) => n.id === 's0')?.tasks.length, { timeout: 10_000 }).toBe(2);
    expect(view.map((n) => n.id)).toEqual(['p0', 's0']);
    const s0 = view.find((n) => n.id === 's0')!;
    expect(s0).toMatchObject({ platform: 'r3-2xlarge', rack: 'r1', state: 'up', rus: 3, busy: 2, free: 1, down: 0, load: 'ok', blocked: false });
    expect([...s0.slots].sort().join('')).toBe('bbf');
    for (const t of s0.tasks) {
      expect(t.job).toBe(jobId);
      expect(t.since).toBeGreaterThanOrEqual(before - 1000);
      expect(s0.slots[t.ru]).toBe('b');
    }
    expect(s0.tasks.map((t) => t.task).sort()).toEqual([0, 1]);
    // Every RU is counted once.
    for (const n of view) expect(n.free + n.busy + n.down).toBe(n.rus);

    // A load report of the node's monitor, and a cordon: both shown.
    await store.put(new LiveKeys(keys).report(jobId, 0), JSON.stringify({ job: jobId, task: 0, server: 's0', rate: 0.4, at: Date.now() }));
    await new Promise<void>((resolve, reject) =>
      c.SetNodeScheduling({ server: 's0', action: 'drain', reason: 'disk check' }, (e) => (e ? reject(e) : resolve())),
    );
    const after = (await nodes()).find((n) => n.id === 's0')!;
    expect(after.state).toBe('draining');
    expect(after.cordon).toMatchObject({ mode: 'drain', reason: 'disk check' });
    expect(after.load).toBe(`slow: task 0 of ${jobId} at 40% of the expected rate`);
    await new Promise<void>((resolve, reject) => c.SetNodeScheduling({ server: 's0', action: 'uncordon', reason: '' }, (e) => (e ? reject(e) : resolve())));
    await new Promise<void>((resolve) => c.CancelJob({ jobId }, () => resolve()));
  });

  it("relays a task's stdout and stderr through TaskLogs, and says why a simulated task has none", async () => {
    const spec = {
      name: 'echo',
      profile: 'spark-lr',
      tasks: 1,
      constraints: { attributes: { exec: 'process' } },
      command: { argv: ['sh', '-c', 'echo "out of $TARCIL_TASK"; echo "err ü" >&2'] },
    };
    const { jobId } = await submit(c, { specJson: JSON.stringify(spec) });
    expect((await waitFinal(c, jobId)).state).toBe('succeeded');
    const got = await logs(`job=${encodeURIComponent(jobId)}&task=0&follow=1`);
    expect(got.status).toBe(200);
    const text = (s: string) =>
      got.lines
        .filter((l) => l['stream'] === s)
        .map((l) => l['text'])
        .join('');
    expect(text('stdout')).toBe('out of 0\n');
    expect(text('stderr')).toBe('err ü\n');
    expect(got.lines.filter((l) => typeof l['path'] === 'string')).toHaveLength(2);
    expect(got.lines[got.lines.length - 1]).toEqual({ end: true });

    const simJob = await submit(c, {
      specJson: JSON.stringify({ name: 'sim', profile: 'spark-lr', tasks: 1, durationMs: 50, constraints: { attributes: { exec: 'simulated' } } }),
    });
    expect((await waitFinal(c, simJob.jobId)).state).toBe('succeeded');
    const none = await logs(`job=${simJob.jobId}&task=0`);
    expect(none.lines).toEqual([
      {
        code: 'FAILED_PRECONDITION',
        error: `node s0 runs its tasks with the simulated executor, which writes no log: task 0 of ${simJob.jobId} has no stdout or stderr to show`,
      },
    ]);
    const past = await logs(`job=${simJob.jobId}&task=4`);
    expect(past.lines[0]).toMatchObject({ code: 'INVALID_ARGUMENT' });
    expect(String(past.lines[0]!['error'])).toMatch(/^task: must be below 1/);
    expect((await logs(`job=j-nope&task=0`)).lines[0]).toMatchObject({ code: 'NOT_FOUND' });
    expect((await getJob(c, simJob.jobId)).state).toBe('succeeded');
  });

  it('names the field of a bad logs request', async () => {
    expect(await logs('task=0')).toMatchObject({ status: 400, text: 'job: is required (a job id)\n' });
    expect(await logs('job=j&task=-1')).toMatchObject({ status: 400, text: 'task: must be a task index: a whole number from 0\n' });
    expect(await logs('job=j&task=0&follow=yes')).toMatchObject({ status: 400, text: 'follow: must be 0 or 1\n' });
  });
});
