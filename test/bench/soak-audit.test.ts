/**
 * The soak's auditor counts a task's submit → running and its stages the same way whether the
 * bench saw the task running before or after SubmitJob's answer gave it the job's id.
 */
import { describe, expect, it } from 'vitest';
import { SoakAuditor } from '../../bench/lib/soak-audit.ts';
import { Keys } from '../../src/state/keys.ts';
import { MemoryStore } from '../../src/store/memory.ts';

async function until(ok: () => boolean, ms = 2000): Promise<void> {
  const end = Date.now() + ms;
  while (!ok()) {
    if (Date.now() > end) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 5));
  }
}

describe('soak auditor', () => {
  it('counts a task seen running before its job was acknowledged in the latencies and the stages, once acknowledged', async () => {
    const store = new MemoryStore();
    const keys = new Keys('/soak-audit/');
    const audit = new SoakAuditor(store, keys);
    await audit.start((await store.revision()) + 1);
    const at = Date.now() - 40;
    const running = (job: string, index: number, attempt: number) =>
      JSON.stringify({ job, index, state: 'running', attempt, ru: { server: 's0', index }, placedAt: at + 10, startedAt: at + 20 });
    // Seen running before the bench knows the job: nothing counted yet.
    await store.put(keys.task('early', 0), running('early', 0, 0));
    await new Promise((r) => setTimeout(r, 50));
    expect(audit.takeMinute().running).toEqual([]);
    audit.acked('early', at);
    // Acknowledged first, then seen running; a later attempt is not a submit → running.
    audit.acked('late', at);
    await store.put(keys.task('late', 0), running('late', 0, 0));
    await store.put(keys.task('late', 1), running('late', 1, 1));
    let m = audit.takeMinute();
    await until(() => {
      const next = audit.takeMinute();
      m = { ...m, running: [...m.running, ...next.running], stages: { ...m.stages, placed: [...m.stages.placed, ...next.stages.placed], started: [...m.stages.started, ...next.stages.started] }, split: [...m.split, ...next.split] };
      return m.running.length >= 2;
    });
    expect(m.running).toHaveLength(2);
    expect(m.stages.placed).toEqual([10, 10]);
    expect(m.stages.started).toEqual([10, 10]);
    expect(m.split).toHaveLength(2);
    await audit.close();
    await store.close();
  });
});
