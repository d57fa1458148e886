/**
 * Reading a tarcil process's /metrics from a benchmark: a bounded scrape, a metric's sum, the
 * cell's RUs by state, the requests to etcd by the records they touch.
 */
import { fmt, mdTable, pct } from './report.ts';

/** A front-end's /metrics answer is waited for this long (a paused one answers nothing). */
const METRICS_TIMEOUT_MS = 5000;

/** The cell's RUs by state, as one front-end counts them. */
export interface RuStates {
  busy: number;
  free: number;
  unschedulable: number;
  down: number;
}

/** `tarcil_rus` of one front-end's scrape, summed over platforms by state (undefined when it did not answer). */
export function ruStates(text: string | undefined): RuStates | undefined {
  if (text === undefined) return undefined;
  const out = { busy: 0, free: 0, unschedulable: 0, down: 0 };
  for (const line of text.split('\n')) {
    const m = /^tarcil_rus\{[^}]*state="(\w+)"[^}]*\} (\S+)$/.exec(line);
    if (m && m[1] && m[1] in out) out[m[1] as keyof typeof out] += Number(m[2]);
  }
  return out;
}

/**
 * One process's /metrics, or undefined when it does not answer. Bounded: a paused front-end (the
 * pause fault) accepts the connection and answers nothing. A scrape also resets the process's
 * event-loop delay histogram (prom-client), so each row scrapes each process once.
 */
export async function scrape(port: number): Promise<string | undefined> {
  try {
    return await (await fetch(`http://127.0.0.1:${port}/metrics`, { signal: AbortSignal.timeout(METRICS_TIMEOUT_MS) })).text();
  } catch {
    return undefined;
  }
}

/** The sum of a metric's samples (every label set) in a scrape; NaN when the process did not answer. */
export function metricSum(text: string | undefined, name: string): number {
  if (text === undefined) return NaN;
  let sum = 0;
  for (const line of text.split('\n'))
    if (line.startsWith(name) && !line.startsWith('#') && (line[name.length] === ' ' || line[name.length] === '{')) sum += Number(line.split(' ').pop());
  return sum;
}

/** `tarcil_store_requests_by_record_total` of a scrape: requests by `kind records` (empty when the process did not answer). */
export function requestsByRecord(text: string | undefined): Map<string, number> {
  const out = new Map<string, number>();
  if (text === undefined) return out;
  for (const m of text.matchAll(/^tarcil_store_requests_by_record_total\{kind="(\w+)",records="([^"]+)"\} (\S+)$/gm)) out.set(`${m[1]} ${m[2]}`, Number(m[3]));
  return out;
}

/** Label-wise sums of several scrapes' counts. */
export function sumMaps(maps: readonly Map<string, number>[]): Map<string, number> {
  const out = new Map<string, number>();
  for (const m of maps) for (const [k, n] of m) out.set(k, (out.get(k) ?? 0) + n);
  return out;
}

type Requests = { frontEnds: Map<string, number>; hollow: Map<string, number> };

/**
 * What each label grew by since `prev`, per task placed; undefined when a count went down (a
 * restarted process counts from 0 again: that row has none).
 */
export function perTaskDelta(now: Requests, prev: Requests, tasks: number): { frontEnds: Record<string, number>; hollow: Record<string, number> } | undefined {
  const side = (a: Map<string, number>, b: Map<string, number>): Record<string, number> | undefined => {
    const out: Record<string, number> = {};
    for (const [k, n] of b) if ((a.get(k) ?? 0) < n) return undefined;
    for (const [k, n] of a) {
      const d = n - (b.get(k) ?? 0);
      if (d > 0) out[k] = d / tasks;
    }
    return out;
  };
  const frontEnds = side(now.frontEnds, prev.frontEnds);
  const hollow = side(now.hollow, prev.hollow);
  return frontEnds && hollow ? { frontEnds, hollow } : undefined;
}

/**
 * Requests to etcd per task by what they touch, the rows with arrivals but the first (median of
 * the rows): the front-ends' and the hollow process's, heaviest first, with their totals.
 */
export function requestsTable(rows: readonly { phase: string; requests?: { frontEnds: Record<string, number>; hollow: Record<string, number> } }[]): string {
  const steady = rows
    .filter((r) => r.phase !== 'drain' && r.phase !== 'end')
    .slice(1)
    .filter((r) => r.requests);
  if (steady.length === 0) return 'Requests to etcd per task: no row with arrivals after the first that counted them.';
  const med = (xs: number[]): number => (xs.length === 0 ? 0 : pct(xs, 0.5));
  const lines: [string, string, number][] = [];
  for (const side of ['frontEnds', 'hollow'] as const) {
    const labels = new Set(steady.flatMap((r) => Object.keys(r.requests?.[side] ?? {})));
    for (const l of labels) lines.push([side === 'frontEnds' ? 'front-ends' : 'hollow nodes', l, med(steady.map((r) => r.requests?.[side][l] ?? 0))]);
  }
  const total = (who: string): number => lines.filter((x) => x[0] === who).reduce((a, x) => a + x[2], 0);
  const shown = lines.filter((x) => x[2] >= 0.0005).sort((a, b) => (a[0] === b[0] ? b[2] - a[2] : a[0] < b[0] ? -1 : 1));
  return [
    'Requests to etcd per task placed, by what each touches (`tarcil_store_requests_by_record_total`: read or write, and the kinds of record of every key it compares, reads or writes; a nested group commit is one request), the rows with arrivals but the first (median of the rows):',
    '',
    mdTable(
      ['process', 'request', 'per task'],
      [
        ...shown.map(([who, l, n]) => [who, l, fmt(n, 3)]),
        ['front-ends', 'all', fmt(total('front-ends'), 3)],
        ['hollow nodes', 'all', fmt(total('hollow nodes'), 3)],
      ],
    ),
  ].join('\n');
}

/**
 * A row's increase of a counter read from one of the cell's processes, kept per process and per
 * start of it (`key` names both): a process that does not answer (NaN) adds nothing and keeps its
 * last reading, and a restarted one counts from 0 under its new key. Summing raw readings over the
 * processes instead made a row with a restart negative, or its share of commits above 100%.
 */
export function counterIncreases(): (key: string, value: number) => number {
  const last = new Map<string, number>();
  return (key, value) => {
    if (!Number.isFinite(value)) return 0;
    const prev = last.get(key) ?? 0;
    last.set(key, value);
    return Math.max(0, value - prev);
  };
}
