/**
 * The soak's auditor counts a task's submit → running and its stages the same way whether the
 * bench saw the task running before or after SubmitJob's answer gave it the job's id, and splits
 * them by the size of the task's job.
 */
import { describe, expect, it } from 'vitest';
import { SoakAuditor, sizeClasses } from '../../bench/lib/soak-audit.ts';
import { Keys } from '../../src/state/keys.ts';
import { MemoryStore } from '../../src/store/memory.ts';
import { freedRuValue } from '../../src/state/records.ts';

async function until(ok: () => boolean, ms = 2000): Promise<void> {
  const end = Date.now() + ms;
  while (!ok()) {
    if (Date.now() > end) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 5));
  }
}

describe('soak auditor', () => {
  it('quotes what the store holds for an acknowledged job left not final: its state, its owner and whether its member lives, its task records', async () => {
    const store = new MemoryStore();
    const keys = new Keys('/soak-audit/');
    const audit = new SoakAuditor(store, keys);
    await audit.start((await store.revision()) + 1);
    await store.put(keys.job('stuck'), JSON.stringify({ id: 'stuck', state: 'running', seen: 41 }));
    await store.put(keys.owner('stuck'), JSON.stringify({ agent: 'a', process: 'p', since: 0, lease: '7f' }));
    const ru = keys.ru({ server: 's3', index: 2 });
    await store.put(
      ru,
      JSON.stringify({ state: 'busy', job: 'stuck', task: 0, caused: [], priority: 0, agent: 'fe0/a1', since: 0, attempt: 0, basedOn: 0, commitId: 'c9' }),
    );
    const freed = await store.put(ru, freedRuValue(JSON.stringify({ job: 'stuck', index: 0, state: 'succeeded', attempt: 0, commitId: 'c9' })));
    const rev = await store.put(
      keys.task('stuck', 0),
      JSON.stringify({ job: 'stuck', index: 0, state: 'running', attempt: 0, commitId: 'c9', ru: { server: 's3', index: 2 } }),
    );
    await store.put(keys.task('stuck', 1), JSON.stringify({ job: 'stuck', index: 1, state: 'failed', attempt: 0 }));
    await store.put(`${keys.tasks('stuck')}00002p`, '{}');
    // A job whose id extends the stuck one's is not counted with it.
    await store.put(keys.task('stuck-2', 0), JSON.stringify({ job: 'stuck-2', index: 0, state: 'running', attempt: 0 }));
    await audit.finalAudit(['stuck']);
    const notFinal = audit.violations.filter((v) => v.kind === 'not-final');
    expect(notFinal).toHaveLength(1);
    expect(notFinal[0]?.detail).toContain('job running, seen 41');
    expect(notFinal[0]?.detail).toContain('owner lease 7f (member gone)');
    expect(notFinal[0]?.detail).toContain('task records: running 1, failed 1; chunk records 1, outcome records 0');
    // The first task left running: its record, and what the auditor last saw of it on an RU.
    expect(notFinal[0]?.detail).toContain(
      `task 0: running on s3/2 (commit c9, attempt 0, record at revision ${rev}), last seen: ${ru} freed carrying its outcome (succeeded) at revision ${freed}`,
    );
    await audit.close();
    await store.close();
  });

  it("counts a placement once: a `placed` record, or a first placement its commit recorded running, not its monitor's running record", async () => {
    const store = new MemoryStore();
    const keys = new Keys('/soak-audit/');
    const audit = new SoakAuditor(store, keys);
    await audit.start((await store.revision()) + 1);
    const rec = (index: number, state: string, extra: Record<string, unknown> = {}) =>
      JSON.stringify({ job: 'p', index, state, attempt: index === 2 ? 1 : 0, ru: { server: 's0', index }, placedAt: Date.now(), ...extra });
    await store.put(keys.task('p', 0), rec(0, 'running', { basedOn: 3, commitId: 'c1', startedAt: Date.now() }));
    await store.put(keys.task('p', 1), rec(1, 'running', { basedOn: 3, commitId: 'c1', startedAt: Date.now() }));
    await store.put(keys.task('p', 2), rec(2, 'placed', { basedOn: 3, commitId: 'c2' }));
    // The monitor records task 2 running as it starts it: not a placement.
    await store.put(keys.task('p', 2), rec(2, 'running', { commitId: 'c2', placedRevision: 7, startedAt: Date.now(), server: 's0' }));
    let placements = 0;
    await until(() => {
      placements += audit.takeMinute().placements;
      return audit.events >= 4;
    });
    placements += audit.takeMinute().placements;
    expect(placements).toBe(3);
    await audit.close();
    await store.close();
  });

  it('times an RU from its freeing to its next placement, and only an RU that was freed (not one first placed or deleted)', async () => {
    const store = new MemoryStore();
    const keys = new Keys('/soak-audit/');
    const audit = new SoakAuditor(store, keys);
    await audit.start((await store.revision()) + 1);
    const busy = (job: string) =>
      JSON.stringify({ state: 'busy', job, task: 0, caused: [], priority: 0, agent: 'a', since: 0, attempt: 0, basedOn: 0, commitId: 'c' });
    const ru0 = keys.ru({ server: 's0', index: 0 });
    const ru1 = keys.ru({ server: 's0', index: 1 });
    await store.put(ru0, busy('a'));
    await store.put(ru1, busy('b'));
    await store.put(ru0, '{"state":"free"}');
    await store.delete(ru1);
    await until(() => audit.events >= 4);
    const reuse: number[] = [...audit.takeMinute().reuseMs];
    await new Promise((r) => setTimeout(r, 60));
    await store.put(ru0, busy('c'));
    await store.put(ru1, busy('d'));
    await until(() => audit.events >= 6);
    reuse.push(...audit.takeMinute().reuseMs);
    // ru0 freed, then placed again at least 60 ms later; ru1 deleted (its node left), not freed.
    expect(reuse).toHaveLength(1);
    expect(reuse[0]).toBeGreaterThanOrEqual(55);
    await audit.close();
    await store.close();
  });

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
      m = {
        ...m,
        running: [...m.running, ...next.running],
        stages: { ...m.stages, placed: [...m.stages.placed, ...next.stages.placed], started: [...m.stages.started, ...next.stages.started] },
        split: [...m.split, ...next.split],
      };
      return m.running.length >= 2;
    });
    expect(m.running).toHaveLength(2);
    expect(m.stages.placed).toEqual([10, 10]);
    expect(m.stages.started).toEqual([10, 10]);
    expect(m.split).toHaveLength(2);
    await audit.close();
    await store.close();
  });

  it("splits submit → running and its stages by the size of the task's job", async () => {
    const store = new MemoryStore();
    const keys = new Keys('/soak-audit/');
    const audit = new SoakAuditor(store, keys, 42);
    await audit.start((await store.revision()) + 1);
    const at = Date.now() - 100;
    const job = (id: string, tasks: number) => JSON.stringify({ id, state: 'queued', submittedAt: at + 1, spec: { id, tasks } });
    const running = (id: string, index: number, placed: number, started: number) =>
      JSON.stringify({ job: id, index, state: 'running', attempt: 0, ru: { server: 's0', index }, placedAt: at + placed, startedAt: at + started });
    await store.put(keys.job('one'), job('one', 1));
    await store.put(keys.job('big'), job('big', 64));
    audit.acked('one', at);
    audit.acked('big', at);
    await store.put(keys.task('one', 0), running('one', 0, 5, 9));
    await store.put(keys.task('big', 0), running('big', 0, 7, 30));
    await store.put(keys.task('big', 63), running('big', 63, 7, 40));
    const by: [number, number, number, number][][] = [[], [], [], []];
    await until(() => {
      audit.takeMinute().runningBySize.forEach((xs, i) => by[i]?.push(...xs));
      return by.flat().length >= 3;
    });
    expect(sizeClasses(42)).toEqual(['1 task', '2–10 tasks', '11–42 tasks', 'over 42 tasks']);
    expect(by[0]?.map((x) => x.slice(1))).toEqual([[5, 4, expect.any(Number)]]);
    expect(by[1]).toEqual([]);
    expect(by[2]).toEqual([]);
    expect(by[3]?.map((x) => x.slice(1, 3))).toEqual([
      [7, 23],
      [7, 33],
    ]);
    // Each task's whole submit → running is the sum of its three stages.
    for (const x of by.flat()) expect(x[0]).toBeCloseTo(x[1] + x[2] + x[3], 5);
    await audit.close();
    await store.close();
  });
});

describe('soak auditor: a task held by two RUs', () => {
  it('is flagged once the second RU takes it, naming both placements (revision, agent, commit, attempt); a task freed first and placed again is not', async () => {
    const store = new MemoryStore();
    const keys = new Keys('/soak-audit-twice/');
    const audit = new SoakAuditor(store, keys);
    await audit.start((await store.revision()) + 1);
    const busy = (agent: string, commitId: string, task = 0) =>
      JSON.stringify({ state: 'busy', job: 'j', task, caused: [], priority: 0, agent, since: 0, attempt: 0, basedOn: 0, commitId });
    const ru = (i: number) => keys.ru({ server: 's0', index: i });
    // Task 1: placed, freed, placed again elsewhere: fine.
    await store.put(ru(2), busy('fe0/a1', 'c0', 1));
    await store.put(ru(2), '{"state":"free"}');
    await store.put(ru(3), busy('fe0/a1', 'c1', 1));
    // Task 0: placed by two front-ends at once.
    const first = await store.put(ru(0), busy('fe0/a2', 'fe0/a2:7'));
    const second = await store.put(ru(1), busy('fe2/a4', 'fe2/a4:3'));
    await until(() => audit.events >= 5);
    const twice = audit.violations.filter((v) => v.kind === 'task-held-twice');
    expect(twice).toHaveLength(1);
    expect(twice[0]!.detail).toContain(
      `j#0 holds ${ru(0)} (revision ${first} by fe0/a2 (commit fe0/a2:7, attempt 0)) and ${ru(1)} (revision ${second} by fe2/a4`,
    );
    await audit.close();
    await store.close();
  });
});
