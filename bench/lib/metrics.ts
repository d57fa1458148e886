/**
 * Reading a tarcil process's /metrics from a benchmark: a bounded scrape, a metric's sum, the
 * cell's RUs by state.
 */

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
