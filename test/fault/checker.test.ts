/**
 * The fault checker (test/support/fault-checker.ts) on small hand-written histories: a clean run
 * passes, and each invariant it checks is shown to fail when the history or the execution records
 * break it, so that a green fault-injection run means something.
 */
import { describe, expect, it } from 'vitest';
import { check, hms, parseRecords, readRuns, type CheckInput, type ExecRun, type FinalState, type ViolationKind } from '../support/fault-checker.ts';
import type { KeyValue, WatchEvent } from '../../src/store/types.ts';

const P = '/f/';
const FREE = { state: 'free' };

/** A history under construction: every call is one revision unless `rev` is given. */
class History {
  readonly events: WatchEvent[] = [];
  rev = 10;
  put(key: string, value: unknown, rev = ++this.rev): number {
    this.rev = Math.max(this.rev, rev);
    this.events.push({ type: 'put', kv: { key: P + key, value: JSON.stringify(value), createRevision: rev, modRevision: rev, version: 1, lease: '0' } });
    return rev;
  }
  del(key: string, rev = ++this.rev): number {
    this.rev = Math.max(this.rev, rev);
    this.events.push({ type: 'delete', kv: { key: P + key, value: '', createRevision: 0, modRevision: rev, version: 0, lease: '0' } });
    return rev;
  }
  job(id: string, state: string, name = id): void {
    this.put(`jobs/${id}`, { spec: { name, tasks: 1 }, state, placed: 0, updatedAt: 0, submittedAt: 0 });
  }
  /** A placement of job#task on server/index by commit, at one revision (RU busy + task placed). */
  place(job: string, task: number, ru: string, commit: string, placedAt = 1000): number {
    const rev = ++this.rev;
    this.put(`rus/${ru}`, { state: 'busy', job, task, commitId: commit, since: placedAt }, rev);
    this.put(`tasks/${job}/${task}`, { job, index: task, state: 'placed', commitId: commit, placedAt }, rev);
    return rev;
  }
  running(job: string, task: number, commit: string, placedRevision: number, placedAt = 1000): void {
    this.put(`tasks/${job}/${task}`, { job, index: task, state: 'running', commitId: commit, placedRevision, placedAt });
  }
  end(job: string, task: number, ru: string, commit: string, state: string): void {
    const rev = ++this.rev;
    this.put(`rus/${ru}`, FREE, rev);
    this.put(`tasks/${job}/${task}`, { job, index: task, state, commitId: commit }, rev);
  }
  /** What the store holds at the end: the last value of every key, by collection. */
  final(): FinalState {
    const last = new Map<string, KeyValue>();
    for (const ev of this.events) {
      if (ev.type === 'put') last.set(ev.kv.key, ev.kv);
      else last.delete(ev.kv.key);
    }
    const coll = (c: string): KeyValue[] => [...last.values()].filter((kv) => kv.key.startsWith(`${P}${c}/`));
    return {
      jobs: coll('jobs'),
      tasks: coll('tasks'),
      owners: coll('owners'),
      queue: coll('queue'),
      rus: coll('rus'),
      servers: coll('servers'),
      requests: coll('requests'),
      decisions: coll('decisions'),
      reports: coll('reports'),
    };
  }
}

function run(job: string, task: number, node: string, ru: number, rev: number, start: number, end: number | undefined, how: ExecRun['how']): ExecRun {
  return { id: `${node}:${start}`, job, task, node, ru, rev, pid: start, start, ...(end !== undefined ? { end } : {}), how };
}

/** One job with one task, placed on n0/0, run and succeeded: the clean base of every case. */
function base(): { h: History; runs: ExecRun[]; rev: number } {
  const h = new History();
  h.put('servers/n0', { id: 'n0' });
  h.put('rus/n0/000', FREE);
  h.put('rus/n0/001', FREE);
  h.job('j1', 'queued', 'fault-0');
  const rev = h.place('j1', 0, 'n0/000', 'a:1');
  h.running('j1', 0, 'a:1', rev);
  h.end('j1', 0, 'n0/000', 'a:1', 'succeeded');
  h.job('j1', 'succeeded', 'fault-0');
  return { h, runs: [run('j1', 0, 'n0', 0, rev, 1100, 2100, 'exit0')], rev };
}

function input(h: History, runs: ExecRun[], over: Partial<CheckInput> = {}): CheckInput {
  return {
    prefix: P,
    events: h.events,
    final: h.final(),
    runs,
    submissions: [{ name: 'fault-0', jobId: 'j1' }],
    servers: ['n0'],
    faults: [],
    window: { start: 0, end: 10_000 },
    ...over,
  };
}

const kinds = (i: CheckInput): ViolationKind[] => [...new Set(check(i).violations.map((v) => v.kind))].sort();

describe('fault checker', () => {
  it('finds nothing wrong with a clean run', () => {
    const { h, runs } = base();
    const r = check(input(h, runs));
    expect(r.violations).toEqual([]);
    expect(r.totals).toMatchObject({ acked: 1, jobsStored: 1, runs: 1, reruns: 0 });
  });

  it('parses execution records, and a run whose process vanished ends when it was seen gone', () => {
    const text = [
      'S j1 0 n0 2 15 100 n0:100:1 1000',
      'S j1 1 n1 0 15 101 n1:101:1 1001',
      'E j1 0 n0 2 15 100 n0:100:1 2000',
      'S j1 2 n1 1 15 102 n1:102:1 1002',
      'K j1 2 n1 1 15 102 n1:102:1 1500',
      '',
    ].join('\n');
    const runs = readRuns(text, new Map([['n1:101:1', 3000]]));
    expect(runs.map((r) => [r.task, r.node, r.ru, r.rev, r.how, r.end])).toEqual([
      [0, 'n0', 2, 15, 'exit0', 2000],
      [1, 'n1', 0, 15, 'vanished', 3000],
      [2, 'n1', 1, 15, 'signalled', 1500],
    ]);
  });

  it('flags a job that is not final, one final twice, and an acknowledged job that failed', () => {
    const { h, runs } = base();
    h.job('j1', 'succeeded', 'fault-0');
    h.job('j2', 'running', 'fault-1');
    h.job('j3', 'failed', 'fault-2');
    const subs = [
      { name: 'fault-0', jobId: 'j1' },
      { name: 'fault-1', jobId: 'j2' },
      { name: 'fault-2', jobId: 'j3' },
      { name: 'fault-3', refused: 'ALREADY_EXISTS' },
    ];
    expect(kinds(input(h, runs, { submissions: subs }))).toEqual(['job-final-count', 'job-state', 'job-stuck', 'submit-refused']);
    // Cancelled is fine for a job whose cancellation was asked for; two stored jobs for one submission are not.
    const c = base();
    c.h.job('j4', 'cancelled', 'fault-0');
    expect(kinds(input(c.h, c.runs, { submissions: [{ name: 'fault-0', jobId: 'j4', cancelAskedAt: 1 }] }))).toEqual(['job-duplicated']);
  });

  it('flags an RU given to a second task, and a task holding two RUs at one revision, but not a move in one transaction', () => {
    const { h, runs } = base();
    h.place('j2', 0, 'n0/001', 'b:1');
    h.place('j3', 0, 'n0/001', 'c:1');
    expect(kinds(input(h, runs))).toContain('ru-double-booked');

    const t = base();
    t.h.place('j2', 0, 'n0/000', 'b:1');
    t.h.place('j2', 0, 'n0/001', 'b:2');
    expect(kinds(input(t.h, t.runs))).toContain('task-held-twice');

    const m = base();
    m.h.place('j2', 0, 'n0/000', 'b:1');
    const rev = ++m.h.rev;
    m.h.put('rus/n0/000', FREE, rev);
    m.h.put('rus/n0/001', { state: 'busy', job: 'j2', task: 0, commitId: 'b:2' }, rev);
    const v = kinds(input(m.h, m.runs));
    expect(v).not.toContain('task-held-twice');
    expect(v).not.toContain('ru-double-booked');
  });

  it('flags a task that succeeded and ran again, even when a lost outcome explains the re-run', () => {
    const { h, runs, rev } = base();
    h.put('tasks/j1/0', { job: 'j1', index: 0, state: 'lost', commitId: 'a:1' });
    const rev2 = h.place('j1', 0, 'n0/001', 'a:2');
    h.running('j1', 0, 'a:2', rev2);
    h.end('j1', 0, 'n0/001', 'a:2', 'succeeded');
    expect(rev2).toBeGreaterThan(rev);
    const r = check(input(h, [...runs, run('j1', 0, 'n0', 1, rev2, 3000, 4000, 'exit0')]));
    expect(r.violations.map((v) => v.kind)).toEqual(['succeeded-task-ran-again']);
    expect(r.totals).toMatchObject({ reruns: 1, rerunsAfterSuccess: 1 });
  });

  it('accepts a re-run after a killed run recorded lost, and flags one with no lost outcome', () => {
    const make = (recordLost: boolean): CheckInput => {
      const h = new History();
      h.put('servers/n0', { id: 'n0' });
      h.job('j1', 'queued', 'fault-0');
      const r1 = h.place('j1', 0, 'n0/000', 'a:1');
      h.running('j1', 0, 'a:1', r1);
      if (recordLost) {
        const rev = ++h.rev;
        h.del('rus/n0/000', rev);
        h.put('tasks/j1/0', { job: 'j1', index: 0, state: 'lost', commitId: 'a:1' }, rev);
      }
      const r2 = h.place('j1', 0, 'n0/001', 'a:2');
      h.running('j1', 0, 'a:2', r2);
      h.end('j1', 0, 'n0/001', 'a:2', 'succeeded');
      h.put('rus/n0/000', FREE);
      h.job('j1', 'succeeded', 'fault-0');
      return input(h, [run('j1', 0, 'n0', 0, r1, 1000, 1500, 'signalled'), run('j1', 0, 'n0', 1, r2, 2000, 3000, 'exit0')]);
    };
    expect(check(make(true)).violations).toEqual([]);
    expect(kinds(make(false))).toContain('rerun-unexplained');
  });

  it('flags overlapping runs of a task, two processes on one RU, and the same in running records', () => {
    const { h, runs, rev } = base();
    h.put('tasks/j1/0', { job: 'j1', index: 0, state: 'lost', commitId: 'a:1' });
    const rev2 = h.place('j1', 0, 'n0/001', 'a:2');
    h.running('j1', 0, 'a:2', rev2);
    h.end('j1', 0, 'n0/001', 'a:2', 'succeeded');
    const overlapping = [run('j1', 0, 'n0', 0, rev, 1100, 2100, 'signalled'), run('j1', 0, 'n0', 1, rev2, 2000, 3000, 'exit0')];
    expect(kinds(input(h, overlapping))).toEqual(['runs-overlap']);
    const sharedRu = [...runs, run('j2', 0, 'n0', 0, 99, 1500, 1600, 'exit0')];
    expect(kinds(input(base().h, sharedRu))).toContain('ru-shared');

    const r = base();
    const r2 = r.h.place('j1', 0, 'n0/001', 'a:2');
    r.h.running('j1', 0, 'a:1', r.rev);
    r.h.running('j1', 0, 'a:2', r2);
    expect(kinds(input(r.h, r.runs))).toContain('recorded-runs-overlap');

    // A monitor that adopts its running task under a new lease records it running again: same commit, same run.
    const h2 = new History();
    h2.put('servers/n0', { id: 'n0' });
    h2.job('j1', 'queued', 'fault-0');
    const r1 = h2.place('j1', 0, 'n0/000', 'a:1');
    h2.running('j1', 0, 'a:1', r1);
    h2.put('rus/n0/000', { state: 'busy', job: 'j1', task: 0, commitId: 'a:1' });
    h2.running('j1', 0, 'a:1', h2.rev);
    h2.end('j1', 0, 'n0/000', 'a:1', 'succeeded');
    h2.job('j1', 'succeeded', 'fault-0');
    expect(check(input(h2, [run('j1', 0, 'n0', 0, r1, 1100, 2100, 'exit0')])).violations).toEqual([]);
  });

  it('keeps a record whose time a killed date left empty out of the runs, and reports it instead of a shared RU', () => {
    // n0/0 ran j1#0 from 1100 to 2100; j2#0 was placed there after, started and at once stopped:
    // its group's SIGTERM killed the `date` of its start line, which has no time.
    const {
      h,
      runs: [j1],
    } = base();
    h.job('j2', 'queued', 'fault-1');
    const rev2 = h.place('j2', 0, 'n0/000', 'b:1', 2200);
    h.running('j2', 0, 'b:1', rev2, 2200);
    h.end('j2', 0, 'n0/000', 'b:1', 'lost');
    const text = [
      `S j1 0 n0 0 ${j1!.rev} 100 n0:100:1 1100`,
      `E j1 0 n0 0 ${j1!.rev} 100 n0:100:1 2100`,
      `S j2 0 n0 0 ${rev2} 200 n0:200:2 `,
      `K j2 0 n0 0 ${rev2} 200 n0:200:2 2300`,
      '',
    ].join('\n');
    const runs = readRuns(text, new Map());
    expect(runs.map((r) => [r.job, r.start, r.end])).toEqual([['j1', 1100, 2100]]);
    expect(kinds(input(h, runs))).not.toContain('ru-shared');
    const parsed = parseRecords(`${text}S j3 x n0 0 1 1 n0:1:1 5\nS j3 0 n0 0 1 1 n0:1:1\n`, new Map());
    expect(parsed.malformed).toEqual([
      `line 3: time '' is not a whole number: "S j2 0 n0 0 ${rev2} 200 n0:200:2 "`,
      `line 5: task 'x' is not a whole number: "S j3 x n0 0 1 1 n0:1:1 5"`,
      `line 6: 8 fields, not 9: "S j3 0 n0 0 1 1 n0:1:1"`,
    ]);
    expect(check(input(h, parsed.runs, { malformed: parsed.malformed })).violations.filter((x) => x.kind === 'record-malformed')).toHaveLength(3);
  });

  it('walks the runs of each RU and of each task in start order, whatever order they are given in', () => {
    const h = new History();
    h.put('servers/n0', { id: 'n0' });
    const at = (job: string, ru: string): number => {
      h.job(job, 'queued', job);
      const rev = h.place(job, 0, ru, `c:${job}`);
      h.running(job, 0, `c:${job}`, rev);
      return rev;
    };
    const [ra, rb, rc] = [at('ja', 'n0/000'), at('jb', 'n0/000'), at('jc', 'n0/001')];
    const a = run('ja', 0, 'n0', 0, ra, 1000, 2000, 'exit0');
    const b = run('jb', 0, 'n0', 0, rb, 3000, 4000, 'exit0');
    const ru = (runs: ExecRun[]): string[] =>
      check(input(h, runs, { submissions: [] }))
        .violations.filter((x) => x.kind === 'ru-shared')
        .map((x) => x.detail);
    // One after the other on n0/0: nothing shared, in either order.
    expect(ru([a, b])).toEqual([]);
    expect(ru([b, a])).toEqual([]);
    // Overlapping, in either order: the later start is the one reported.
    const b2 = { ...b, start: 1500 };
    expect(ru([b2, a])).toEqual([`n0/0: jb#0 started at ${hms(1500)} while ja#0 ran until ${hms(2000)}`]);
    // A run with no end shares its RU with any run that starts after it, not with one that ended before it.
    const open = { ...a, end: undefined, how: 'open' as const } as ExecRun;
    delete open.end;
    expect(ru([b, open])).toEqual([`n0/0: jb#0 started at ${hms(3000)} while ja#0 ran until the end`]);
    const openLate = { ...b, how: 'open' as const } as ExecRun;
    delete openLate.end;
    expect(ru([openLate, a])).toEqual([]);
    // Runs on other RUs do not count, and a long run is not forgotten behind a short one.
    const c = run('jc', 0, 'n0', 1, rc, 1200, 1300, 'exit0');
    const long = { ...a, end: 5000 };
    const inside = { ...b, start: 2500, end: 2600 };
    const after = { ...b, id: 'x', start: 4500, end: 4600 };
    expect(ru([after, c, inside, long])).toHaveLength(2);
    // Two runs of one task: their overlap is found in either order too.
    const again = { ...a, id: 'again', node: 'n1', start: 1900, end: 2500 };
    const overlaps = (runs: ExecRun[]): number => check(input(h, runs, { submissions: [] })).violations.filter((x) => x.kind === 'runs-overlap').length;
    expect(overlaps([again, a])).toBe(1);
    expect(overlaps([{ ...again, start: 2100 }, a])).toBe(0);
  });

  it('flags a submission its client kept trying that the cell did not take once the faults before it were repaired', () => {
    const { h, runs } = base();
    const lost = (faults: CheckInput['faults'], gaveUpAt: number): string[] =>
      check(
        input(h, runs, {
          faults,
          submissions: [
            { name: 'fault-0', jobId: 'j1' },
            { name: 'fault-1', refused: 'UNAVAILABLE', submittedAt: 2000, gaveUpAt },
          ],
        }),
      )
        .violations.filter((x) => x.kind === 'submission-lost')
        .map((x) => x.detail);
    // A front-end killed in a quorum loss, listening again at 8000.
    const feKill = [{ kind: 'quorum-loss-fe-kill' as const, target: 'm0+m1, fe0', start: 1000, healed: 8000, electionMs: 500 }];
    expect(lost(feKill, 12_000)).toEqual([]);
    expect(lost(feKill, 14_000)).toEqual([
      `fault-1: not acknowledged (UNAVAILABLE); its client tried until ${hms(14_000)}, 6000 ms after the cell was repaired`,
    ]);
    // A quorum loss is repaired when etcd has a leader again, after the members' restart.
    expect(lost([{ kind: 'quorum-loss', target: 'm0+m1', start: 1000, healed: 8000, electionMs: 2000 }], 14_000)).toEqual([]);
    // With no fault, trying for the settle time is enough; a fault after the client gave up does not count.
    expect(lost([], 6000)).toEqual([]);
    expect(lost([{ ...feKill[0]!, start: 20_000, healed: 30_000 }], 8000)).toHaveLength(1);
    // A client that stops before its deadline (a count of tries) did not keep trying: the submission is lost too.
    const early = check(
      input(h, runs, {
        faults: feKill,
        submissions: [
          { name: 'fault-0', jobId: 'j1' },
          { name: 'fault-1', refused: 'UNAVAILABLE', submittedAt: 2000, gaveUpAt: 5000, deadlineAt: 32_000 },
        ],
      }),
    );
    expect(early.violations.map((x) => x.detail)).toEqual([
      `fault-1: not acknowledged (UNAVAILABLE); its client gave up at ${hms(5000)}, before its deadline ${hms(32_000)}`,
    ]);
  });

  it('flags a run etcd never recorded, and a success with no completed run', () => {
    const { h, runs } = base();
    expect(kinds(input(h, [...runs, run('j9', 0, 'n0', 1, 77, 5000, 6000, 'exit0')]))).toContain('run-unrecorded');
    expect(kinds(input(h, [{ ...(runs[0] as ExecRun), how: 'signalled' }]))).toEqual(['success-without-run']);
  });

  it('flags what is left behind', () => {
    const { h, runs } = base();
    h.put('rus/n0/001', { state: 'reserved', job: 'j1', task: 0 });
    h.put('rus/n1/000', FREE);
    h.put('owners/j1', { agent: 'a' });
    h.put('queue/999/0000000000000001/j1', { job: 'j1' });
    h.put('requests/r1', { job: 'j-missing' });
    h.put('decisions/j-missing', { records: [] });
    h.put('reports/j1/000000', { job: 'j1' });
    h.put('tasks/j1/1', { job: 'j1', index: 1, state: 'running', commitId: 'x' });
    const open = run('j5', 0, 'n0', 1, 0, 9000, undefined, 'open');
    expect(kinds(input(h, [...runs, open], { servers: ['n0', 'n9'] }))).toEqual(
      [
        'decision-orphaned',
        'owner-leaked',
        'process-leaked',
        'queue-leaked',
        'report-leaked',
        'request-orphaned',
        'ru-leaked',
        'ru-stray',
        'run-unrecorded',
        'server-missing',
        'task-active-at-end',
      ].sort(),
    );
  });

  it('measures the stall from a fault (from its end for a quorum loss) and puts re-runs down to the fault before them', () => {
    const h = new History();
    h.put('servers/n0', { id: 'n0' });
    const runs: ExecRun[] = [];
    // Placements decided at 1000, 5000 and 12000 ms, each started 200 ms later.
    for (const [i, at] of [
      [0, 1000],
      [1, 5000],
      [2, 12_000],
    ] as const) {
      h.job(`j${i}`, 'queued', `fault-${i}`);
      const rev = h.place(`j${i}`, 0, 'n0/000', `c:${i}`, at);
      h.running(`j${i}`, 0, `c:${i}`, rev, at);
      h.end(`j${i}`, 0, 'n0/000', `c:${i}`, 'succeeded');
      h.job(`j${i}`, 'succeeded', `fault-${i}`);
      runs.push(run(`j${i}`, 0, 'n0', 0, rev, at + 200, at + 300, 'exit0'));
    }
    const faults = [
      { kind: 'leader-kill' as const, target: 'm0', start: 4000, healed: 6000, electionMs: 900 },
      { kind: 'quorum-loss' as const, target: 'm0+m1', start: 7000, healed: 10_000, electionMs: 1500 },
    ];
    const r = check(input(h, runs, { faults, submissions: [] }));
    expect(r.violations).toEqual([]);
    expect(r.faults.map((f) => [f.kind, f.stallMs, f.electionMs])).toEqual([
      ['leader-kill', 1200, 900],
      ['quorum-loss', 2200, 1500],
    ]);
  });
});
