import { describe, expect, it } from 'vitest';
import { watchStalls } from '../../src/util/stalls.ts';
import type { Logger } from '../../src/util/log.ts';

/** Blocks the event loop for ms (what a long synchronous pass does). */
function block(ms: number): void {
  const end = performance.now() + ms;
  while (performance.now() < end) {
    /* busy */
  }
}

describe('event-loop stall warnings', () => {
  it('logs a stall over the threshold with how long it lasted, and nothing for a short one', async () => {
    const warned: { stalledMs: number }[] = [];
    const log = { warn: (o: { stalledMs: number }) => warned.push(o) } as unknown as Logger;
    const w = watchStalls(log, 500);
    await new Promise((r) => setTimeout(r, 150));
    block(50);
    await new Promise((r) => setTimeout(r, 250));
    expect(warned).toEqual([]);
    block(1000);
    await new Promise((r) => setTimeout(r, 250));
    w.stop();
    expect(warned.length).toBe(1);
    expect(warned[0]!.stalledMs).toBeGreaterThanOrEqual(500);
    expect(w.stats.count).toBe(1);
  });
});
