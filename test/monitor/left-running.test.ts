/**
 * A `tarcil monitor --executor process` SIGKILLed while its task runs leaves the task to its
 * supervisor, which stops it at the node's deadline unless the deadline moves on. If the monitor
 * is started again before that deadline, the task has meanwhile been placed elsewhere and its RU
 * given to another task, the new life moves the deadline on for every supervisor of the node: it
 * must stop the stale copy itself, before it registers, though the store no longer names that
 * attempt anywhere on this node. A real etcd (the suite's), the monitor as a child process (so it
 * can be SIGKILLed with its supervisors left alive), placements written as an agent and an owner
 * would; the tasks' own record of their runs is the judge.
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, inject, it } from 'vitest';
import { N_RESOURCES } from '../../src/model/types.ts';
import { Keys } from '../../src/state/keys.ts';
import type { LiveTaskRecord } from '../../src/state/live-records.ts';
import { FREE_RU_VALUE, parseJson, type PlacedRuRecord } from '../../src/state/records.ts';
import { openStore } from '../../src/store/index.ts';
import type { ClusterStore } from '../../src/store/types.ts';
import { tarcil, type TarcilProc } from '../support/procs.ts';
import { until } from '../support/until.ts';

const cleanup: (() => Promise<unknown> | void)[] = [];
afterEach(async () => {
  for (const f of cleanup.splice(0).reverse()) await f();
});

/** Start and end lines with the time (ms), job and pid; a SIGTERM ends the run with a K line. */
const SCRIPT = `#!/bin/sh
trap 'echo "K $(date +%s%3N) $TARCIL_JOB $$" >> "$RUNS"; exit 143' TERM
echo "S $(date +%s%3N) $TARCIL_JOB $$" >> "$RUNS"
sleep "$1" &
wait $!
echo "E $(date +%s%3N) $TARCIL_JOB $$" >> "$RUNS"
`;

/** A process of the group still runs (zombies, dead but not yet reaped by whoever adopted them, do not count). */
const groupAlive = (pgid: number): boolean =>
  readdirSync('/proc').some((e) => {
    if (!/^\d+$/.test(e)) return false;
    try {
      const stat = readFileSync(`/proc/${e}/stat`, 'utf8');
      const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      return Number(f[2]) === pgid && f[0] !== 'Z' && f[0] !== 'X';
    } catch {
      return false;
    }
  });

const rec = (job: string, commitId: string, attempt: number): PlacedRuRecord => ({
  state: 'busy',
  job,
  task: 0,
  caused: new Array<number>(N_RESOURCES).fill(0.1),
  priority: 0,
  agent: 'test',
  since: Date.now(),
  attempt,
  basedOn: 0,
  commitId,
});
const taskRec = (job: string, server: string, commitId: string, attempt: number): LiveTaskRecord =>
  ({ job, index: 0, state: 'placed', ru: { server, index: 0 }, attempt, placedAt: Date.now(), basedOn: 0, commitId, agent: 'test' }) as LiveTaskRecord;

/** Places task 0 of `job` on server/0 as an agent's commit would (the job's record carries the command). */
async function place(store: ClusterStore, keys: Keys, server: string, job: string, argv: string[], env: Record<string, string>): Promise<number> {
  const now = Date.now();
  await store.put(
    keys.job(job),
    JSON.stringify({ spec: { id: job, name: job, command: { argv, env } }, state: 'placed', placed: 1, updatedAt: now, submittedAt: now }),
  );
  const ruKey = keys.ru({ server, index: 0 });
  const cur = await store.get(ruKey);
  const res = await store.txn({
    compare: [{ key: ruKey, target: 'mod', op: '==', value: cur?.modRevision ?? 0 }],
    success: [
      { type: 'put', key: ruKey, value: JSON.stringify(rec(job, `c-${job}`, 0)) },
      { type: 'put', key: keys.task(job, 0), value: JSON.stringify(taskRec(job, server, `c-${job}`, 0)) },
    ],
  });
  expect(res.succeeded, `${server}/0 was free for ${job}`).toBe(true);
  return res.revision;
}

describe('a monitor started again before its previous life’s deadline', () => {
  it('stops a task of that life that the store gave to another node meanwhile, before its RU is given out again', async () => {
    const store = await openStore(inject('etcdEndpoint').replace('http://', 'etcd://'));
    cleanup.push(() => store.close());
    const dir = mkdtempSync(join(tmpdir(), 'tarcil-left-running-'));
    cleanup.push(() => rmSync(dir, { recursive: true, force: true }));
    // Whatever of the test's supervisors and tasks is left when it ends (a failure leaves the stale copy).
    cleanup.push(() => {
      for (const e of readdirSync('/proc')) {
        try {
          if (/^\d+$/.test(e) && readFileSync(`/proc/${e}/cmdline`, 'utf8').includes(dir)) process.kill(Number(e), 'SIGKILL');
        } catch {
          // gone
        }
      }
    });
    const keys = new Keys(`/left-running-${Date.now()}/`);
    const script = join(dir, 'task.sh');
    const runsFile = join(dir, 'runs.txt');
    writeFileSync(script, SCRIPT, { mode: 0o755 });
    writeFileSync(runsFile, '');
    const logDir = join(dir, 'A');
    // A grace of 30 s: the previous life's deadline is far off when the monitor comes back.
    const args = [
      'monitor',
      '--store',
      inject('etcdEndpoint').replace('http://', 'etcd://'),
      '--prefix',
      keys.prefix,
      '--lease-ttl',
      '2',
      '--node',
      'A',
      '--platform',
      'r3-2xlarge',
      '--rus',
      '1',
      '--executor',
      'process',
      '--log-dir',
      logDir,
      '--disconnect-grace',
      '30s',
      '--port',
      '0',
    ];
    const procs: TarcilProc[] = [];
    const start = async (): Promise<TarcilProc> => {
      const m = tarcil(args);
      procs.push(m);
      await m.waitFor(/listening on/);
      return m;
    };
    cleanup.push(() => Promise.all(procs.map((p) => p.kill('SIGKILL'))));
    const runs = (): string[][] =>
      readFileSync(runsFile, 'utf8')
        .trim()
        .split('\n')
        .filter(Boolean)
        .map((l) => l.split(' '));

    const first = await start();
    await until('A registered', async () => (await store.get(keys.ru({ server: 'A', index: 0 })))?.value === FREE_RU_VALUE, 15_000, 25);
    const rev1 = await place(store, keys, 'A', 'j1', [script, '60'], { RUNS: runsFile });
    await until('j1 running', () => runs().some((r) => r[0] === 'S' && r[2] === 'j1'), 15_000, 25);
    const pgid = Number(readFileSync(join(logDir, 'j1', `0-${rev1}.pid`), 'utf8').trim());
    expect(groupAlive(pgid)).toBe(true);

    // The monitor dies; its task's supervisor does not. The owner places j1 again on node B, and A's RU record is gone.
    await first.kill('SIGKILL');
    const bKey = keys.ru({ server: 'B', index: 0 });
    const moved = await store.txn({
      compare: [],
      success: [
        { type: 'delete', key: keys.ru({ server: 'A', index: 0 }) },
        { type: 'put', key: bKey, value: JSON.stringify(rec('j1', 'c-j1-b', 1)) },
        { type: 'put', key: keys.task('j1', 0), value: JSON.stringify(taskRec('j1', 'B', 'c-j1-b', 1)) },
      ],
    });
    expect(moved.succeeded).toBe(true);
    expect(groupAlive(pgid), 'the supervisor keeps the task until the deadline').toBe(true);

    const second = await start();
    await until('A registered again', async () => (await store.get(keys.ru({ server: 'A', index: 0 })))?.value === FREE_RU_VALUE, 15_000, 25);
    // Stopped before the registration freed the RU: gone by now, and its end is in its own record.
    expect(
      groupAlive(pgid),
      `the previous life's copy of j1 still runs after the new life registered; runs: ${JSON.stringify(runs())}; monitor:\n${second.output()}`,
    ).toBe(false);
    expect(second.output()).toMatch(/"job":"j1".*"exitRecord":"none".*"journalled":"nothing".*was still running; stopped it before registering/);
    // The store is left as the owner wrote it: j1 is B's now.
    expect(parseJson<LiveTaskRecord>(await store.get(keys.task('j1', 0)))).toMatchObject({ state: 'placed', ru: { server: 'B' }, commitId: 'c-j1-b' });

    // A's RU is given to j2: it runs alone there.
    await place(store, keys, 'A', 'j2', [script, '0.2'], { RUNS: runsFile });
    await until('j2 ran', () => runs().some((r) => r[0] === 'E' && r[2] === 'j2'), 15_000, 25);
    const j1 = runs().filter((r) => r[2] === 'j1');
    const j2Start = Number(runs().find((r) => r[0] === 'S' && r[2] === 'j2')?.[1]);
    expect(
      j1.map((r) => r[0]),
      JSON.stringify(runs()),
    ).toEqual(['S']);
    // j1's shell was killed with SIGKILL (no K line): what is known is that its group was gone before A registered again.
    expect(j2Start).toBeGreaterThan(Number(j1[0]?.[1]));
  }, 90_000);
});
