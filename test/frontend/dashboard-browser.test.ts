/**
 * The dashboard in a real browser: Debian's Chromium (test/setup/global-chromium.ts) driven by
 * playwright-core against the demo cell (its monitors and a front-end in one process, as `tarcil
 * up` runs them) with the dashboard on a free port. A job submitted over gRPC appears on the jobs
 * page, progresses and finishes there; its RUs show up busy in the cell's heat map and leave it;
 * its page shows the decision record (samples, placements with their Q, the time per stage) and
 * its events; the admission and throughput pages show the buckets and the placements.
 *
 * With TARCIL_DASHBOARD_SCREENSHOTS=<dir> it also saves the screenshots the README shows.
 */
import { join } from 'node:path';
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
// @ts-expect-error -- a plain ES module of the build (scripts/), without types
import { buildDashboard } from '../../scripts/build-dashboard.mjs';
import { submit, waitFinal } from '../support/live.ts';
import { startDemoCell } from '../support/live.ts';

const bin = inject('chromium');
const shots = process.env.TARCIL_DASHBOARD_SCREENSHOTS;

type Cell = Awaited<ReturnType<typeof startDemoCell>>;
let cell: Cell;
let browser: Browser;
let base: string;

describe.skipIf(!bin)('the dashboard in Chromium', () => {
  beforeAll(async () => {
    await (buildDashboard as () => Promise<string>)();
    cell = await startDemoCell({ prefix: '/dashboard-browser/', name: 'db', seed: 5, agents: 2, metricsPort: 0, httpPort: 0 });
    base = `http://127.0.0.1:${cell.sched.httpPort}/`;
    browser = await chromium.launch({ executablePath: bin, args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'] });
  });
  afterAll(async () => {
    await browser?.close();
    await cell?.close();
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
    expect([...states].some((s) => s === 'running' || s === 'placed'), [...states].join(',')).toBe(true);
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
    expect(await jobsPage.getByTestId('timeline').locator('.stage').count()).toBeGreaterThan(0);
    expect(await jobsPage.getByTestId('task').count()).toBe(6);
    expect(await jobsPage.getByTestId('job-state').innerText()).toBe('succeeded');
    const events = await jobsPage.getByTestId('events').locator('li').allInnerTexts();
    expect(events.length).toBeGreaterThan(1);
    expect(events[events.length - 1]).toContain('succeeded');
    await cellPage.close();
    if (shots) await jobsPage.screenshot({ path: join(shots, 'dashboard-job.png'), fullPage: true });
    await jobsPage.close();
  });

  it('filters the jobs list, and shows the admission buckets and the throughput of the last minutes', async () => {
    const ids: string[] = [];
    for (const name of ['etl-a', 'etl-b', 'web-c']) ids.push((await submit(cell.client, { specJson: JSON.stringify({ name, profile: 'spark-lr', tasks: 4, durationMs: 300 }) })).jobId);
    for (const id of ids) await waitFinal(cell.client, id);

    const page = await open('#/jobs');
    await expect.poll(() => page.getByTestId('job-row').count()).toBe(4);
    await page.getByTestId('job-filter').fill('etl');
    await expect.poll(() => page.getByTestId('job-row').count()).toBe(2);
    await page.getByTestId('job-filter').fill('');
    await page.getByTestId('state-filter').selectOption('active');
    await expect.poll(() => page.getByTestId('job-row').count()).toBe(0);
    await page.getByTestId('state-filter').selectOption('');
    if (shots) await page.screenshot({ path: join(shots, 'dashboard-jobs.png') });

    await page.getByTestId('tab-admission').click();
    await page.getByTestId('page-admission').waitFor();
    expect(await page.getByTestId('bucket').count()).toBeGreaterThan(0);

    await page.getByTestId('tab-throughput').click();
    await page.getByTestId('page-throughput').waitFor();
    // 6 + 3 × 4 tasks placed, counted from the same counters as /metrics.
    await expect.poll(() => page.getByTestId('placements-total').innerText().then(Number), { timeout: 10_000 }).toBe(18);
    // The chart draws after its data arrive: on a loaded machine, a moment after the counter.
    await expect.poll(() => page.locator('[data-testid="chart-rate"] canvas').count(), { timeout: 10_000 }).toBe(1);
    if (shots) await page.screenshot({ path: join(shots, 'dashboard-throughput.png') });
    await page.close();
  });

  it('shows the heat map of a busy cell', async () => {
    const { jobId } = await submit(cell.client, { specJson: JSON.stringify({ name: 'long', profile: 'spark-lr', tasks: 14, durationMs: 600_000 }) });
    const page = await open('#/cell');
    await expect.poll(() => busyOnPage(page), { timeout: 15_000 }).toBe(14);
    await page.getByTestId('rack').nth(2).click();
    await page.getByTestId('rack-detail').waitFor();
    await expect.poll(() => page.locator('[data-testid="rack-detail"] [data-state="b"]').count()).toBeGreaterThan(0);
    if (shots) await page.screenshot({ path: join(shots, 'dashboard-cell.png'), fullPage: true });
    await page.close();
    await new Promise<void>((resolve) => cell.client.CancelJob({ jobId }, () => resolve()));
  });
});
