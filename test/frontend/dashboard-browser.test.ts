/**
 * The dashboard in a real browser: Debian's Chromium (test/setup/global-chromium.ts) driven by
 * playwright-core against the demo cell (its monitors and a front-end in one process, as `tarcil
 * up` runs them) with the dashboard on a free port. Every view on an empty cell; a job submitted
 * over gRPC appears on the jobs page, progresses and finishes there, its RUs busy in the cell's
 * heat map and then free; the admission and throughput pages; and a full cell with a queued gang:
 * its page leads with the reason (the cell is full, held by whom) and its placements, its repeated
 * attempts folded into one line with a count, every stage named whole; the nodes view lists each
 * node's tasks, state and load verdict; a task's logs are read from its node; the charts leave
 * gaps; the rack view's RUs say what they hold.
 *
 * With TARCIL_DASHBOARD_SCREENSHOTS=<dir> it also saves a screenshot of every view of the full
 * cell (docs/dashboard-*.png).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
// @ts-expect-error -- a plain ES module of the build (scripts/), without types
import { buildDashboard } from '../../scripts/build-dashboard.mjs';
import { startMonitor, type MonitorProcess } from '../../src/node/runtime.ts';
import { SystemClock } from '../../src/util/clock.ts';
import { createLogger } from '../../src/util/log.ts';
import { startDemoCell, submit, waitFinal } from '../support/live.ts';

const bin = inject('chromium');
const shots = process.env.TARCIL_DASHBOARD_SCREENSHOTS;

type Cell = Awaited<ReturnType<typeof startDemoCell>>;
let cell: Cell;
let browser: Browser;
let base: string;
let proc: MonitorProcess | undefined;
let logDir: string | undefined;

describe.skipIf(!bin)('the dashboard in Chromium', () => {
  beforeAll(async () => {
    await (buildDashboard as () => Promise<string>)();
    cell = await startDemoCell({ prefix: '/dashboard-browser/', name: 'db', seed: 5, agents: 2, metricsPort: 0, httpPort: 0 });
    base = `http://127.0.0.1:${cell.sched.httpPort}/`;
    browser = await chromium.launch({ executablePath: bin, args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'] });
  });
  afterAll(async () => {
    await browser?.close();
    await proc?.close();
    await cell?.close();
    if (logDir) rmSync(logDir, { recursive: true, force: true });
  });

  async function open(hash: string): Promise<Page> {
    const page = await browser.newPage({ viewport: { width: 1280, height: 860 } });
    const errors: string[] = [];
    page.on('pageerror', (e) => errors.push(e.message));
    await page.goto(`${base}${hash}`);
    await page.getByTestId('live').filter({ hasText: 'live' }).waitFor({ timeout: 10_000 });
    expect(errors).toEqual([]);
    return page;
  }

  const busyOnPage = (page: Page): Promise<number> => page.getByTestId('total-busy').locator('b').innerText().then(Number);

  it('shows every view of an empty cell', async () => {
    const page = await open('#/cell');
    expect(await busyOnPage(page)).toBe(0);
    expect(Number(await page.getByTestId('total-RUs').locator('b').innerText())).toBe(24);
    await page.getByTestId('rack-legend').waitFor();

    await page.getByTestId('tab-nodes').click();
    await expect.poll(() => page.getByTestId('node-row').count(), { timeout: 10_000 }).toBe(10);
    expect(await page.getByTestId('node-task').count()).toBe(0);
    expect(new Set(await page.getByTestId('node-state').allInnerTexts())).toEqual(new Set(['up']));
    expect(new Set(await page.getByTestId('node-load').allInnerTexts())).toEqual(new Set(['ok']));
    expect(await page.getByTestId('nodes-total').innerText()).toBe('10');

    await page.getByTestId('tab-jobs').click();
    await page.getByTestId('no-jobs').waitFor();
    expect(await page.getByTestId('job-row').count()).toBe(0);

    await page.getByTestId('tab-admission').click();
    await page.getByTestId('no-waiting').waitFor();
    expect(await page.getByTestId('bucket').count()).toBeGreaterThan(0);

    await page.getByTestId('tab-logs').click();
    await page.getByTestId('logs-job').waitFor();
    expect(await page.getByTestId('log').count()).toBe(0);

    await page.getByTestId('tab-throughput').click();
    expect(await page.getByTestId('placements-total').innerText()).toBe('0');
    await page.close();
  });

  it('shows a job submitted over gRPC appear, progress and finish, its RUs in the heat map, and its decision record', async () => {
    const cellPage = await open('#/cell');
    const jobsPage = await open('#/jobs');
    expect(await cellPage.getByTestId('rack').count()).toBeGreaterThan(0);
    expect(await busyOnPage(cellPage)).toBe(0);
    const totalRus = Number(await cellPage.getByTestId('total-RUs').locator('b').innerText());
    expect(totalRus).toBe(24);

    const { jobId } = await submit(cell.client, { specJson: JSON.stringify({ name: 'dash-job', profile: 'spark-lr', tasks: 6, durationMs: 2500 }) });
    const row = jobsPage.locator(`[data-testid="job-row"][data-job="${jobId}"]`);
    await row.waitFor({ timeout: 10_000 });

    // While it runs: its state on the jobs page before it ends, and its RUs busy in the heat map.
    const states = new Set<string>();
    let maxBusy = 0;
    const t0 = Date.now();
    for (;;) {
      const state = (await row.getAttribute('data-state')) ?? '';
      states.add(state);
      maxBusy = Math.max(maxBusy, await busyOnPage(cellPage));
      if (state === 'succeeded' || Date.now() - t0 > 30_000) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    expect(states.has('succeeded'), [...states].join(',')).toBe(true);
    expect(
      [...states].some((s) => s === 'running' || s === 'placed'),
      [...states].join(','),
    ).toBe(true);
    expect(maxBusy).toBe(6);
    // The racks that held it showed it: one rack tile at least had busy RUs.
    await expect.poll(() => busyOnPage(cellPage), { timeout: 10_000 }).toBe(0);
    expect(await row.locator('td').nth(4).innerText()).toBe('6/6');

    // The rack drill-down: every RU of the rack, by server.
    await cellPage.getByTestId('rack').first().click();
    await cellPage.getByTestId('rack-detail').waitFor();
    expect(await cellPage.getByTestId('server').count()).toBeGreaterThan(0);

    // Its page: the decision record and the events seen as they happened.
    await row.locator('a').click();
    await jobsPage.getByTestId('page-job').waitFor();
    await jobsPage.getByTestId('decision').waitFor({ timeout: 10_000 });
    await expect.poll(() => jobsPage.getByTestId('placement').count(), { timeout: 10_000 }).toBe(6);
    expect(await jobsPage.getByTestId('sample').count()).toBeGreaterThan(0);
    expect((await jobsPage.getByTestId('stage-label').locator('b').allInnerTexts()).join(',')).toBe('queue,admission,sample size,select,commit');
    expect(await jobsPage.getByTestId('reason').getAttribute('data-kind')).toBe('done');
    expect(await jobsPage.getByTestId('task').count()).toBe(6);
    expect(await jobsPage.getByTestId('job-state').innerText()).toBe('succeeded');
    const events = await jobsPage.getByTestId('events').locator('li').allInnerTexts();
    expect(events.length).toBeGreaterThan(1);
    expect(events[events.length - 1]).toContain('succeeded');
    await cellPage.close();
    await jobsPage.close();
  });

  it('filters the jobs list, and shows the admission buckets and the throughput of the last minutes', async () => {
    const ids: string[] = [];
    for (const name of ['etl-a', 'etl-b', 'web-c'])
      ids.push((await submit(cell.client, { specJson: JSON.stringify({ name, profile: 'spark-lr', tasks: 4, durationMs: 300 }) })).jobId);
    for (const id of ids) await waitFinal(cell.client, id);

    const page = await open('#/jobs');
    await expect.poll(() => page.getByTestId('job-row').count()).toBe(4);
    await page.getByTestId('job-filter').fill('etl');
    await expect.poll(() => page.getByTestId('job-row').count()).toBe(2);
    await page.getByTestId('job-filter').fill('');
    await page.getByTestId('state-filter').selectOption('active');
    await expect.poll(() => page.getByTestId('job-row').count()).toBe(0);
    await page.getByTestId('state-filter').selectOption('');

    await page.getByTestId('tab-admission').click();
    await page.getByTestId('page-admission').waitFor();
    expect(await page.getByTestId('bucket').count()).toBeGreaterThan(0);

    await page.getByTestId('tab-throughput').click();
    await page.getByTestId('page-throughput').waitFor();
    // 6 + 3 × 4 tasks placed, counted from the same counters as /metrics.
    await expect.poll(() => page.getByTestId('placements-total').innerText().then(Number), { timeout: 10_000 }).toBe(18);
    // The chart draws after its data arrive: on a loaded machine, a moment after the counter.
    await expect.poll(() => page.locator('[data-testid="chart-rate"] canvas').count(), { timeout: 10_000 }).toBe(1);
    await page.close();
  });

  it("explains a queued gang on a full cell: its reason first, its attempts folded; the nodes, their tasks and a task's logs; the heat map", async () => {
    // 24 RUs of the demo servers held by one job; then a node that runs real processes, whose
    // 2 RUs a job with a command holds: the cell is full.
    // A short job first: the RUs it frees are the history admission predicts a wait from.
    const short = (await submit(cell.client, { specJson: JSON.stringify({ name: 'short', profile: 'spark-lr', tasks: 4, durationMs: 300 }) })).jobId;
    await waitFinal(cell.client, short);
    const fill = (await submit(cell.client, { specJson: JSON.stringify({ name: 'fill', profile: 'spark-lr', tasks: 16, durationMs: 600_000 }) })).jobId;
    const cache = (await submit(cell.client, { specJson: JSON.stringify({ name: 'cache', profile: 'memcached', tasks: 8, durationMs: 600_000 }) })).jobId;
    const cellPage = await open('#/cell');
    await expect.poll(() => busyOnPage(cellPage), { timeout: 15_000 }).toBe(24);
    logDir = mkdtempSync(join(tmpdir(), 'tarcil-dashboard-logs-'));
    proc = await startMonitor({
      store: cell.store,
      keys: cell.keys,
      clock: new SystemClock(),
      log: createLogger('test'),
      server: { id: 'p0', platform: 'r3-2xlarge', rack: 'r9', rus: 2, speed: 1, attributes: { exec: 'process' } },
      executor: 'process',
      logDir,
      host: '127.0.0.1',
      port: 0,
      leaseTtlSeconds: 3,
    });
    const script = 'for i in 1 2 3; do echo "line $i of task $TARCIL_TASK"; done; echo "a warning" >&2; sleep 600';
    const printer = (
      await submit(cell.client, {
        specJson: JSON.stringify({
          name: 'printer',
          profile: 'spark-lr',
          tasks: 2,
          constraints: { attributes: { exec: 'process' } },
          command: { argv: ['sh', '-c', script] },
        }),
      })
    ).jobId;
    await expect.poll(() => busyOnPage(cellPage), { timeout: 15_000 }).toBe(26);
    const gang = (
      await submit(cell.client, { specJson: JSON.stringify({ name: 'gang-10', profile: 'spark-lr', tasks: 10, mode: 'gang', durationMs: 60_000 }) })
    ).jobId;
    // An operator cordons the node that runs processes (the nodes view shows it).
    await new Promise<void>((resolve, reject) =>
      cell.client.SetNodeScheduling({ server: 'p0', action: 'cordon', reason: 'disk check' }, (e) => (e ? reject(e) : resolve())),
    );

    // The gang's page: the reason in one sentence first, then the placements (none), then the rest.
    const page = await open(`#/job/${gang}`);
    await expect.poll(() => page.getByTestId('reason').getAttribute('data-kind'), { timeout: 15_000 }).toBe('cell-full');
    const reason = await page.getByTestId('reason-text').innerText();
    expect(reason).toMatch(/full/i);
    expect(reason).toContain(fill);
    expect(await page.getByTestId('reason').locator(`a[href="#/job/${fill}"]`).count()).toBe(1);
    expect(await page.getByTestId('no-placements').innerText()).toBe('None yet: 10 tasks wait to be placed.');
    const y = async (id: string): Promise<number> => (await page.getByTestId(id).boundingBox())?.y ?? -1;
    await page.getByTestId('decision').waitFor();
    expect(await y('reason')).toBeLessThan(await y('placements'));
    expect(await y('placements')).toBeLessThan(await y('decision'));
    // Its attempts, each finding no RU, folded: one line with a count, which adds up to all of them.
    const folds = async (row: string, summary: string): Promise<{ total: number; lines: number; counts: number[] }> => {
      const total = Number(await page.getByTestId(summary).getAttribute('data-total'));
      const counts: number[] = [];
      for (const l of await page.getByTestId(row).all()) counts.push(Number(await l.getAttribute('data-count')));
      return { total, lines: counts.length, counts };
    };
    // Read while the page may draw again: the figures of one drawing add up.
    const addsUp = async (row: string, summary: string): Promise<string> => {
      const f = await folds(row, summary);
      return f.counts.reduce((a, b) => a + b, 0) === f.total && f.lines <= f.total ? 'adds up' : JSON.stringify(f);
    };
    await expect.poll(() => addsUp('sample', 'samples-summary'), { timeout: 10_000 }).toBe('adds up');
    expect(await addsUp('admission-line', 'admission-summary')).toBe('adds up');
    // Every stage named whole, none cut by its box.
    const labels = page.getByTestId('stage-label');
    expect((await labels.locator('b').allInnerTexts()).join(',')).toBe('queue,admission,sample size,select,commit');
    for (const l of await labels.all())
      expect(await l.evaluate((e: { scrollWidth: number; clientWidth: number }) => e.scrollWidth <= e.clientWidth + 1)).toBe(true);

    if (shots) await page.screenshot({ path: join(shots, 'dashboard-job.png'), fullPage: true });
    // A gang that waited long: its explanation as the front-end answered it, with 60 equal sample
    // attempts and 20 admission verdicts that differ only in their numbers (what a long wait on a
    // full cell leaves in the decision record), served to the page in place of the live answer.
    const live = (await (await fetch(`${base}api/job?id=${encodeURIComponent(gang)}`)).json()) as { explanation: Record<string, unknown> };
    const verdict = (i: number) => ({
      action: i < 2 ? 'queue' : 'best-effort',
      reason: `only 0 of 0 free RUs are acceptable (no bucket); 13 more expected free within ${1 + i / 10} s`,
      f: 0,
      acceptableFree: 0,
      totalFree: 0,
      needed: 10,
    });
    const long = {
      ...live,
      explanation: {
        ...live.explanation,
        samples: Array.from({ length: 60 }, () => ({ r: 32, f: 0, candidates: 0 })),
        admission: Array.from({ length: 20 }, (_, i) => verdict(i)),
      },
    };
    await page.route('**/api/job?*', (route) => route.fulfill({ json: long }));
    await page.goto(`${base}#/jobs`);
    await page.goto(`${base}#/job/${gang}`);
    await expect.poll(() => folds('sample', 'samples-summary'), { timeout: 10_000 }).toEqual({ total: 60, lines: 1, counts: [60] });
    expect(await page.getByTestId('sample').innerText()).toMatch(/attempts 1–60\s+32\s+0\.000\s+0\s+×60/);
    expect(await folds('admission-line', 'admission-summary')).toEqual({ total: 20, lines: 2, counts: [2, 18] });
    expect(await page.getByTestId('admission-summary').innerText()).toBe('20 verdicts, in 2 lines');
    await page.unroute('**/api/job?*');

    // The jobs list and admission name the gang waiting.
    await page.getByTestId('tab-admission').click();
    await expect.poll(() => page.getByTestId('waiting-job').allInnerTexts(), { timeout: 10_000 }).toContainEqual(expect.stringContaining(gang));
    if (shots) await page.screenshot({ path: join(shots, 'dashboard-admission.png'), fullPage: true });
    await page.getByTestId('tab-jobs').click();
    expect(['queued', 'admitted']).toContain(await page.locator(`[data-testid="job-row"][data-job="${gang}"]`).getAttribute('data-state'));
    expect(await page.getByTestId('job-row').count()).toBe(9);
    if (shots) await page.screenshot({ path: join(shots, 'dashboard-jobs.png'), fullPage: true });

    // The nodes: every node with its tasks, state and load verdict.
    await page.getByTestId('tab-nodes').click();
    await expect.poll(() => page.getByTestId('node-task').count(), { timeout: 10_000 }).toBe(26);
    expect(await page.getByTestId('node-row').count()).toBe(11);
    const p0 = page.locator('[data-testid="node-row"][data-node="p0"]');
    expect(await p0.getByTestId('node-task').allInnerTexts()).toEqual([expect.stringContaining(printer), expect.stringContaining(printer)]);
    expect(await p0.getByTestId('node-rus').innerText()).toContain('2/2 busy');
    for (const v of await page.getByTestId('node-load').allInnerTexts()) expect(v).toMatch(/^(ok|slow: task|blocked: )/);
    await expect.poll(() => p0.getAttribute('data-state'), { timeout: 10_000 }).toBe('cordoned');
    expect(await p0.getByTestId('node-state').innerText()).toBe('cordoned');
    if (shots) await page.screenshot({ path: join(shots, 'dashboard-nodes.png'), fullPage: true });

    // A task's logs, from its node's row: what the process wrote, stdout and stderr.
    await p0.locator('a.logs-link').first().click();
    await page.getByTestId('page-logs').waitFor();
    await expect.poll(() => page.getByTestId('log').innerText(), { timeout: 10_000 }).toMatch(/line 1 of task \d\nline 2 of task \d\nline 3 of task \d\n/);
    await expect.poll(() => page.locator('[data-testid="log"] .stderr').innerText(), { timeout: 10_000 }).toBe('a warning\n');
    expect(await page.getByTestId('logs-status').innerText()).toBe('following');
    if (shots) await page.screenshot({ path: join(shots, 'dashboard-logs.png') });
    // A task of the simulated executor has none, and the page says why.
    await page.goto(`${base}#/logs/${fill}/0`);
    await expect.poll(() => page.getByTestId('logs-error').innerText(), { timeout: 10_000 }).toContain('simulated executor, which writes no log');

    // The latency chart: seconds without a placement in their window are gaps.
    await page.goto(`${base}#/throughput`);
    await expect.poll(() => page.getByTestId('latency-gaps').getAttribute('data-gaps').then(Number), { timeout: 20_000 }).toBeGreaterThan(0);
    if (shots) await page.screenshot({ path: join(shots, 'dashboard-throughput.png') });

    // The heat map: a rack's RUs, each saying what it holds.
    await cellPage.locator('[data-testid="rack"][data-rack="m3-large/r000"]').click();
    await cellPage.getByTestId('rack-detail').waitFor();
    await cellPage.getByTestId('ru-legend').waitFor();
    const busy = cellPage.locator('[data-testid="rack-detail"] [data-testid="ru"][data-state="b"]');
    await expect.poll(() => busy.count()).toBeGreaterThan(0);
    expect(await busy.first().getAttribute('title')).toMatch(new RegExp(`RU \\d+: busy — job (${fill}|${cache}|${printer}), task \\d+`));
    if (shots) await cellPage.screenshot({ path: join(shots, 'dashboard-cell.png'), fullPage: true });

    await page.close();
    await cellPage.close();
    for (const jobId of [gang, fill, cache, printer]) await new Promise<void>((resolve) => cell.client.CancelJob({ jobId }, () => resolve()));
  });
});
