import * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { SchedulerClient } from '../../src/rpc/gen/tarcil/v1/Scheduler.ts';
import type { SubmitJobRequest } from '../../src/rpc/gen/tarcil/v1/SubmitJobRequest.ts';
import type { SchedulerProcess } from '../../src/frontend/runtime.ts';
import type { MemoryStore } from '../../src/store/memory.ts';
import type { Keys } from '../../src/state/keys.ts';
import { isFreeRuValue, lastOfFreedRu } from '../../src/state/records.ts';
import { statusCommand } from '../../src/cli/client.ts';
import { getJob, startDemoCell, submit, waitFinal } from '../support/live.ts';

let cell: Awaited<ReturnType<typeof startDemoCell>>;
let store: MemoryStore;
let keys: Keys;
let sched: SchedulerProcess;
let c: SchedulerClient;

beforeAll(async () => {
  cell = await startDemoCell({ prefix: '/api/', name: 'api', seed: 7, agents: 2, metricsPort: 0 });
  ({ store, keys, sched, client: c } = cell);
});
afterAll(async () => {
  await cell?.close();
});

const good = { name: 'ok', profile: 'spark-lr', tasks: 2, durationMs: 100 };
const inline = { name: 'inl', profile: { caused: [10, 10, 10, 10, 10, 10, 10, 10, 10, 10] }, tasks: 1, durationMs: 50 };

/** Each case: a request, and the field its INVALID_ARGUMENT must name. */
const HOSTILE: { why: string; req: SubmitJobRequest; field: string }[] = [
  { why: 'empty request', req: {}, field: 'spec' },
  { why: 'not JSON', req: { specJson: '{name:' }, field: 'spec_json' },
  { why: 'JSON array', req: { specJson: '[]' }, field: '(root)' },
  { why: 'missing name', req: { specJson: JSON.stringify({ ...good, name: undefined }) }, field: 'name' },
  { why: 'missing tasks', req: { specJson: JSON.stringify({ ...good, tasks: undefined }) }, field: 'tasks' },
  { why: 'negative tasks', req: { specJson: JSON.stringify({ ...good, tasks: -3 }) }, field: 'tasks' },
  { why: 'zero tasks', req: { specJson: JSON.stringify({ ...good, tasks: 0 }) }, field: 'tasks' },
  { why: 'huge tasks', req: { specJson: JSON.stringify({ ...good, tasks: 1e12 }) }, field: 'tasks' },
  { why: 'fractional tasks', req: { specJson: JSON.stringify({ ...good, tasks: 2.5 }) }, field: 'tasks' },
  { why: 'NaN tasks (structured)', req: { spec: { name: 'x', profileName: 'spark-lr', tasks: NaN, durationMs: 10 } }, field: 'tasks' },
  { why: 'Infinity duration (structured)', req: { spec: { name: 'x', profileName: 'spark-lr', tasks: 1, durationMs: Infinity } }, field: 'durationMs' },
  { why: 'string tasks', req: { specJson: JSON.stringify({ ...good, tasks: '4' }) }, field: 'tasks' },
  { why: 'unknown profile', req: { specJson: JSON.stringify({ ...good, profile: 'no-such-profile' }) }, field: 'profile' },
  { why: 'path as profile', req: { specJson: JSON.stringify({ ...good, profile: '../../etc/passwd' }) }, field: 'profile' },
  { why: 'short vector', req: { specJson: JSON.stringify({ ...inline, profile: { caused: [1, 2, 3] } }) }, field: 'profile.caused' },
  {
    why: 'vector out of range',
    req: { specJson: JSON.stringify({ ...inline, profile: { caused: [10, 10, 10, 10, 10, 10, 10, 10, 10, 100] } }) },
    field: 'profile.caused[9]',
  },
  {
    why: 'negative vector entry (structured)',
    req: { spec: { name: 'x', inlineProfile: { caused: [-1, 0, 0, 0, 0, 0, 0, 0, 0, 0] }, tasks: 1, durationMs: 5 } },
    field: 'profile.caused[0]',
  },
  { why: 'no duration and no command', req: { specJson: JSON.stringify({ name: 'x', profile: 'spark-lr', tasks: 1 }) }, field: 'durationMs' },
  { why: 'unknown field', req: { specJson: JSON.stringify({ ...good, rootAccess: true }) }, field: 'rootAccess' },
  { why: 'bad mode', req: { specJson: JSON.stringify({ ...good, mode: 'yolo' }) }, field: 'mode' },
  { why: 'bad locality', req: { specJson: JSON.stringify({ ...good, locality: { mode: 'everywhere' } }) }, field: 'locality.mode' },
  { why: 'priority too high', req: { specJson: JSON.stringify({ ...good, priority: 5000 }) }, field: 'priority' },
  { why: 'negative queue time', req: { specJson: JSON.stringify({ ...good, maxQueueMs: -1 }) }, field: 'maxQueueMs' },
  {
    why: 'unknown platform constraint',
    req: { specJson: JSON.stringify({ ...good, constraints: { platforms: ['cray-1'] } }) },
    field: 'constraints.platforms[0]',
  },
  { why: 'empty argv', req: { specJson: JSON.stringify({ name: 'x', profile: 'spark-lr', tasks: 1, command: { argv: [] } }) }, field: 'command.argv' },
  {
    why: 'NUL in argv',
    req: { specJson: JSON.stringify({ name: 'x', profile: 'spark-lr', tasks: 1, command: { argv: ['sh', 'a\u0000b'] } }) },
    field: 'command.argv[1]',
  },
  {
    why: 'bad env name',
    req: { specJson: JSON.stringify({ name: 'x', profile: 'spark-lr', tasks: 1, command: { argv: ['true'], env: { 'A=B': 'x' } } }) },
    field: 'command.env',
  },
  { why: 'name with a slash (key injection)', req: { specJson: JSON.stringify({ ...good, name: 'a/../../servers/x' }) }, field: 'name' },
  { why: 'oversized payload', req: { specJson: JSON.stringify({ ...good, pad: 'x'.repeat(200_000) }) }, field: 'spec_json' },
  {
    why: 'oversized argv',
    req: { specJson: JSON.stringify({ name: 'x', profile: 'spark-lr', tasks: 1, command: { argv: Array.from({ length: 40 }, () => 'y'.repeat(2000)) } }) },
    field: '(root)',
  },
  { why: 'both spec and spec_json', req: { spec: { name: 'x' }, specJson: '{}' }, field: 'spec' },
];

describe('Scheduler API over gRPC', () => {
  it(`rejects ${HOSTILE.length} malformed or hostile specs with INVALID_ARGUMENT naming the field, persisting nothing`, async () => {
    const before = await store.range('/api/');
    for (const h of HOSTILE) {
      const err = await submit(c, h.req).then(
        () => undefined,
        (e: grpc.ServiceError) => e,
      );
      expect(err, h.why).toBeDefined();
      expect(err?.code, `${h.why}: ${err?.details}`).toBe(grpc.status.INVALID_ARGUMENT);
      expect(err?.details, h.why).toContain(h.field === '(root)' ? '' : `${h.field}`);
    }
    const after = await store.range('/api/');
    const keysOf = (kvs: { key: string }[]): string[] =>
      kvs.map((kv) => kv.key).filter((k) => k.includes('/jobs/') || k.includes('/owners/') || k.includes('/tasks/'));
    expect(keysOf(after.kvs)).toEqual(keysOf(before.kvs));
    expect(HOSTILE.length).toBeGreaterThanOrEqual(20);
  });

  it('accepts a structured spec and a JSON spec, persists before answering, and runs them', async () => {
    const a = await submit(c, { spec: { name: 'structured', profileName: 'spark-lr', tasks: 3, durationMs: 100, locality: { mode: 'spread' } } });
    // Acknowledged means durable: the record is there the moment the call returns.
    expect((await store.get(keys.job(a.jobId)))?.value).toBeTruthy();
    const b = await submit(c, { specJson: JSON.stringify(inline) });
    const [ja, jb] = await Promise.all([waitFinal(c, a.jobId), waitFinal(c, b.jobId)]);
    expect(ja.state).toBe('succeeded');
    expect(ja.taskList.map((t) => t.state)).toEqual(['succeeded', 'succeeded', 'succeeded']);
    expect(new Set(ja.taskList.map((t) => t.ru?.server)).size).toBe(3); // spread
    expect(jb.state).toBe('succeeded');
  });

  it('streams state changes with WatchJob until the job is final', async () => {
    const { jobId } = await submit(c, { specJson: JSON.stringify({ ...good, name: 'watched', tasks: 2, durationMs: 300 }) });
    const states: string[] = [];
    await new Promise<void>((resolve, reject) => {
      const s = c.WatchJob({ jobId });
      s.on('data', (ev: { job: { state: string } | null }) => {
        if (ev.job && states[states.length - 1] !== ev.job.state) states.push(ev.job.state);
      });
      s.on('end', () => resolve());
      s.on('error', reject);
    });
    expect(states[states.length - 1]).toBe('succeeded');
    expect(states).toContain('running');
  });

  it('cancels a running job: its tasks are killed and its RUs freed', async () => {
    const { jobId } = await submit(c, { specJson: JSON.stringify({ ...good, name: 'long', tasks: 2, durationMs: 60_000 }) });
    for (let i = 0; i < 100 && (await getJob(c, jobId)).state !== 'running'; i++) await new Promise((r) => setTimeout(r, 50));
    await new Promise<void>((resolve, reject) => c.CancelJob({ jobId }, (e) => (e ? reject(e) : resolve())));
    const j = await waitFinal(c, jobId, 10_000);
    expect(j.state).toBe('cancelled');
    expect(j.taskList.every((t) => t.state === 'cancelled')).toBe(true);
    const rus = await store.range(keys.rus());
    // No RU holds the job any more (a freed one may carry its last task's outcome).
    expect(rus.kvs.filter((kv) => !isFreeRuValue(kv.value) && kv.value.includes(jobId))).toEqual([]);
    expect(rus.kvs.filter((kv) => kv.value.includes(jobId)).map((kv) => lastOfFreedRu(kv.value)?.state)).toEqual(['cancelled', 'cancelled']);
  });

  it('explains a job, lists jobs and shows the cluster', async () => {
    const { jobId } = await submit(c, { specJson: JSON.stringify({ ...good, name: 'explained' }) });
    await waitFinal(c, jobId);
    const e = await new Promise<{ text: string; placements: unknown[]; samples: { r: number }[] }>((resolve, reject) =>
      c.ExplainJob({ jobId }, (err, res) => (err || !res ? reject(err ?? new Error('empty')) : resolve(res))),
    );
    expect(e.placements.length).toBe(2);
    expect(e.samples[0]?.r).toBeGreaterThan(0);
    expect(e.text).toContain('admission');
    const list = await new Promise<{ jobs: { id: string }[] }>((resolve, reject) =>
      c.ListJobs({ states: ['succeeded'], limit: 100 }, (err, res) => (err || !res ? reject(err ?? new Error('empty')) : resolve(res))),
    );
    expect(list.jobs.some((j) => j.id === jobId)).toBe(true);
    const cl = await new Promise<{ servers: unknown[]; rus: number }>((resolve, reject) =>
      c.GetCluster({}, (err, res) => (err || !res ? reject(err ?? new Error('empty')) : resolve(res))),
    );
    expect(cl.servers.length).toBe(10);
    expect(cl.rus).toBe(24);
    const nf = await new Promise<grpc.ServiceError | undefined>((resolve) => c.GetJob({ jobId: 'j-nope' }, (err) => resolve(err ?? undefined)));
    expect(nf?.code).toBe(grpc.status.NOT_FOUND);
  });

  it('honours deadlines and serves health, reflection and metrics', async () => {
    const expired = await new Promise<grpc.ServiceError | undefined>((resolve) =>
      c.SubmitJob({ specJson: JSON.stringify(good) }, { deadline: new Date(Date.now() - 1) }, (err) => resolve(err ?? undefined)),
    );
    expect(expired?.code).toBe(grpc.status.DEADLINE_EXCEEDED);
    const res = await fetch(`http://127.0.0.1:${sched.metricsPort ?? 0}/metrics`);
    const text = await res.text();
    expect(text).toContain('tarcil_scheduling_latency_seconds_bucket');
    expect(text).toContain('tarcil_commit_conflicts_total');
    expect(text).toContain('tarcil_sample_size_bucket');
  });

  it('pages a job of 1,200 tasks through GetJob and tarcil status --tasks-from', async () => {
    const { jobId } = await submit(c, { specJson: JSON.stringify({ name: 'paged', profile: 'spark-lr', tasks: 1200, durationMs: 5 }) });
    await waitFinal(c, jobId, 60_000);
    const first = await getJob(c, jobId);
    expect(first.taskList.map((t) => t.index)).toEqual(Array.from({ length: 1000 }, (_, i) => i));
    expect(first.nextTaskFrom).toBe(1000);
    expect(first.tasksOmitted).toBe(200);
    const lines: string[] = [];
    await statusCommand(jobId, { server: `127.0.0.1:${sched.port}`, timeout: 5000, json: false }, (l) => lines.push(l));
    expect(lines.join('\n')).toContain(`200 task(s) with a record not on this page; the next page: tarcil status ${jobId} --tasks-from 1000`);
    const later: string[] = [];
    await statusCommand(jobId, { server: `127.0.0.1:${sched.port}`, timeout: 5000, json: true, tasksFrom: 1000 }, (l) => later.push(l));
    const page = JSON.parse(later.join('\n')) as { taskList: { index: number }[]; nextTaskFrom: number; tasksOmitted: number };
    expect(page.taskList.map((t) => t.index)).toEqual(Array.from({ length: 200 }, (_, i) => 1000 + i));
    expect(page.nextTaskFrom).toBe(0);
    expect(page.tasksOmitted).toBe(1000);
  }, 90_000);
});
