/**
 * A front-end's /metrics as dashboards read it, on the demo cell (front-end and monitors in one
 * process, as `tarcil up` runs them, on the embedded store): the standard process_/nodejs_ names,
 * labels (agent, platform, outcome, server), gauges of RUs and jobs by state, the monitors' node
 * metrics in the same registry, histogram buckets up to minutes, and /healthz and /readyz.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DURATION_BUCKETS } from '../../src/frontend/metrics.ts';
import { loadCatalog, expandCluster, resolveCluster } from '../../src/model/catalog.ts';
import { getJob, startDemoCell, submit, waitFinal } from '../support/live.ts';

type Cell = Awaited<ReturnType<typeof startDemoCell>>;
let cell: Cell;
const catalog = loadCatalog();
const servers = expandCluster(resolveCluster('demo', catalog), catalog.platforms);
const platformOf = new Map(servers.map((s) => [s.id, s.platform]));
const platforms = [...new Set(servers.map((s) => s.platform))];
const totalRus = servers.reduce((a, s) => a + s.rus, 0);

beforeAll(async () => {
  cell = await startDemoCell({ prefix: '/metrics-cell/', name: 'mc', seed: 3, agents: 2, metricsPort: 0 });
});
afterAll(async () => {
  await cell?.close();
});

interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

async function scrape(): Promise<{ text: string; samples: Sample[] }> {
  const res = await fetch(`http://127.0.0.1:${cell.sched.metricsPort}/metrics`);
  expect(res.status).toBe(200);
  const text = await res.text();
  const samples: Sample[] = [];
  for (const line of text.split('\n')) {
    if (line.startsWith('#') || line.trim() === '') continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!m) throw new Error(`unparsed: ${line}`);
    const labels: Record<string, string> = {};
    for (const [, k, v] of (m[2] ?? '').matchAll(/([a-zA-Z_]+)="([^"]*)"/g)) labels[k!] = v!;
    samples.push({ name: m[1]!, labels, value: Number(m[3]) });
  }
  return { text, samples };
}

const pick = (samples: Sample[], name: string, labels: Record<string, string> = {}): Sample[] =>
  samples.filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v));
const sum = (ss: Sample[]): number => ss.reduce((a, s) => a + s.value, 0);

describe('front-end /metrics', () => {
  it('carries the standard process_ and nodejs_ names, and no doubled prefix', async () => {
    const { samples } = await scrape();
    for (const name of [
      'process_cpu_seconds_total',
      'process_resident_memory_bytes',
      'process_start_time_seconds',
      'nodejs_eventloop_lag_p99_seconds',
      'nodejs_heap_size_used_bytes',
      'nodejs_version_info',
    ]) {
      expect(pick(samples, name).length, name).toBeGreaterThan(0);
    }
    expect(samples.filter((s) => s.name.startsWith('tarcil_process_'))).toEqual([]);
  });

  it('counts a job by agent, platform and outcome; latency buckets reach 30 minutes', async () => {
    const { jobId } = await submit(cell.client, { specJson: JSON.stringify({ name: 'mc-ok', profile: 'spark-lr', tasks: 6, durationMs: 50 }) });
    const job = await waitFinal(cell.client, jobId);
    expect(job.state).toBe('succeeded');
    const { samples, text } = await scrape();
    const placed = pick(samples, 'tarcil_tasks_placed_total');
    expect(sum(placed)).toBe(6);
    const agents = new Set(cell.sched.manager.agents.map((a) => a.id));
    for (const p of placed) {
      expect(agents.has(p.labels.agent!), p.labels.agent).toBe(true);
      expect(platforms).toContain(p.labels.platform);
    }
    // The platform label is the platform of the servers the tasks went to.
    const full = await getJob(cell.client, jobId);
    const byPlatform = new Map<string, number>();
    for (const t of full.taskList) byPlatform.set(platformOf.get(t.ru!.server)!, (byPlatform.get(platformOf.get(t.ru!.server)!) ?? 0) + 1);
    for (const [platform, n] of byPlatform) expect(sum(pick(samples, 'tarcil_tasks_placed_total', { platform }))).toBe(n);
    expect(pick(samples, 'tarcil_jobs_finished_total', { outcome: 'succeeded' })[0]?.value).toBe(1);
    expect(sum(pick(samples, 'tarcil_decisions_total'))).toBeGreaterThanOrEqual(1);
    for (const d of pick(samples, 'tarcil_decisions_total')) expect(agents.has(d.labels.agent!)).toBe(true);
    const les = pick(samples, 'tarcil_scheduling_latency_seconds_bucket').map((s) => s.labels.le);
    expect(les).toContain('1800');
    expect(les).toContain('60');
    expect(DURATION_BUCKETS.at(-1)).toBe(1800);
    expect(text).toMatch(/tarcil_admission_wait_seconds_bucket\{le="600",agent="[^"]+"\}/);
  });

  it('gauges RUs by platform and state, and the jobs it owns by state, as the cell is now', async () => {
    const { jobId } = await submit(cell.client, { specJson: JSON.stringify({ name: 'mc-long', profile: 'spark-lr', tasks: 3, durationMs: 600_000 }) });
    for (;;) {
      const j = await getJob(cell.client, jobId);
      if (j.taskStates.running === 3) break;
      await new Promise((r) => setTimeout(r, 50));
    }
    let { samples } = await scrape();
    expect(sum(pick(samples, 'tarcil_rus'))).toBe(totalRus);
    expect(sum(pick(samples, 'tarcil_rus', { state: 'busy' }))).toBe(3);
    expect(sum(pick(samples, 'tarcil_rus', { state: 'free' }))).toBe(totalRus - 3);
    // The job is of namespace default: its 3 RUs, and no other namespace holds any.
    expect(pick(samples, 'tarcil_namespace_rus').map((x) => [x.labels.namespace, x.value])).toEqual([['default', 3]]);
    for (const p of platforms) {
      const rus = servers.filter((s) => s.platform === p).reduce((a, s) => a + s.rus, 0);
      expect(sum(pick(samples, 'tarcil_rus', { platform: p }))).toBe(rus);
    }
    expect(pick(samples, 'tarcil_jobs', { state: 'running' })[0]?.value).toBe(1);
    expect(sum(pick(samples, 'tarcil_servers', { state: 'up' }))).toBe(servers.length);
    // The monitors of the process, in the same registry: their busy RUs add up to the same 3.
    expect(sum(pick(samples, 'tarcil_monitor_busy_rus'))).toBe(3);
    expect(sum(pick(samples, 'tarcil_monitor_running_tasks'))).toBe(3);

    await new Promise<void>((resolve, reject) => cell.client.CancelJob({ jobId }, (err) => (err ? reject(err) : resolve())));
    expect((await waitFinal(cell.client, jobId)).state).toBe('cancelled');
    for (;;) {
      ({ samples } = await scrape());
      if (sum(pick(samples, 'tarcil_rus', { state: 'free' })) === totalRus) break;
      await new Promise((r) => setTimeout(r, 50));
    }
    expect(pick(samples, 'tarcil_jobs', { state: 'running' })).toEqual([]);
    expect(pick(samples, 'tarcil_jobs_finished_total', { outcome: 'cancelled' })[0]?.value).toBe(1);
  });

  it('exports every monitor of the process with server and platform labels; completed tasks are no kills, registrations no task events', async () => {
    const { samples } = await scrape();
    const rus = pick(samples, 'tarcil_monitor_rus');
    expect(rus).toHaveLength(servers.length);
    for (const s of servers) expect(pick(samples, 'tarcil_monitor_rus', { server: s.id, platform: s.platform })[0]?.value).toBe(s.rus);
    // 6 tasks completed, 3 cancelled (killed by their monitor): nothing else was killed.
    expect(sum(pick(samples, 'tarcil_monitor_task_events_total', { event: 'completed' }))).toBe(6);
    expect(sum(pick(samples, 'tarcil_monitor_task_events_total', { event: 'started' }))).toBe(9);
    expect(sum(pick(samples, 'tarcil_monitor_task_events_total', { event: 'killed' }))).toBe(3);
    expect(pick(samples, 'tarcil_monitor_task_events_total').map((s) => s.labels.event)).not.toContain('registrations');
    expect(sum(pick(samples, 'tarcil_monitor_registrations_total'))).toBe(servers.length);
  });

  it('counts a cordoned server and its free RUs as unschedulable', async () => {
    const id = servers[0]!.id;
    await new Promise<void>((resolve, reject) =>
      cell.client.SetNodeScheduling({ server: id, action: 'cordon', reason: 'test' }, (err) => (err ? reject(err) : resolve())),
    );
    while (cell.sched.manager.view.state.server(id)?.cordoned !== true) await new Promise((r) => setTimeout(r, 20));
    let { samples } = await scrape();
    expect(pick(samples, 'tarcil_servers', { platform: servers[0]!.platform, state: 'cordoned' })[0]?.value).toBe(1);
    expect(sum(pick(samples, 'tarcil_rus', { state: 'unschedulable' }))).toBe(servers[0]!.rus);
    await new Promise<void>((resolve, reject) =>
      cell.client.SetNodeScheduling({ server: id, action: 'uncordon', reason: '' }, (err) => (err ? reject(err) : resolve())),
    );
    while (cell.sched.manager.view.state.server(id)?.cordoned !== false) await new Promise((r) => setTimeout(r, 20));
    ({ samples } = await scrape());
    expect(sum(pick(samples, 'tarcil_rus', { state: 'unschedulable' }))).toBe(0);
    expect(sum(pick(samples, 'tarcil_rus', { state: 'free' }))).toBe(totalRus);
  });

  it('/healthz answers 200, /readyz 200 while the store answers and the agents schedule, anything else 404', async () => {
    const base = `http://127.0.0.1:${cell.sched.metricsPort}`;
    const h = await fetch(`${base}/healthz`);
    expect(h.status).toBe(200);
    expect(await h.text()).toBe('ok\n');
    const r = await fetch(`${base}/readyz`);
    expect(r.status).toBe(200);
    expect(await r.text()).toBe('ok\n');
    expect((await fetch(`${base}/nothing`)).status).toBe(404);
  });
});
