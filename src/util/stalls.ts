/**
 * Event-loop stall warnings for the daemons: a process whose loop stops turning for a second or
 * more sends no keepalive, answers no RPC and reads no watch event meanwhile, which is the first
 * thing to know when its leases lapse. A timer ticks every 100 ms; a tick that comes late by more
 * than the threshold is logged with how late it was.
 */
import type { Logger } from './log.ts';

export const STALL_WARN_MS = 1000;
const TICK_MS = 100;

export interface StallStats {
  /** Stalls over the threshold since the watch started. */
  count: number;
  /** The longest one, ms. */
  worstMs: number;
}

/** Starts watching; returns the running counts and a stop function. */
export function watchStalls(log: Logger, thresholdMs = STALL_WARN_MS): { stats: StallStats; stop: () => void } {
  const stats: StallStats = { count: 0, worstMs: 0 };
  let last = performance.now();
  const t = setInterval(() => {
    const now = performance.now();
    const late = now - last - TICK_MS;
    last = now;
    if (late < thresholdMs) return;
    stats.count++;
    stats.worstMs = Math.max(stats.worstMs, late);
    log.warn({ stalledMs: Math.round(late) }, 'event loop stalled: no timer, RPC or store answer was handled meanwhile');
  }, TICK_MS);
  t.unref();
  return { stats, stop: () => clearInterval(t) };
}
