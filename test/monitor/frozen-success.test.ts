/**
 * A task that succeeds while its monitor is frozen (SIGSTOP) for longer than its lease + grace:
 * its supervisor writes the success to the store itself, fenced on the RU record, before the
 * front-ends may place the task again, so the job ends while the monitor is still frozen and the
 * task runs once. Two `tarcil monitor --executor process` nodes of one RU each (the other node is
 * where the task would run again), one front-end, a real etcd; the task's own record of its runs
 * is the judge.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { schedulerClient } from '../../src/cli/grpc-clients.ts';
import type { LiveJobRecord } from '../../src/state/live-records.ts';
import { Keys } from '../../src/state/keys.ts';
import { parseJson } from '../../src/state/records.ts';
import { openStore } from '../../src/store/index.ts';
import type { ClusterStore } from '../../src/store/types.ts';
import { startEtcd, type EtcdProcess } from '../support/etcd.ts';
import { submit } from '../support/live.ts';
import { tarcil, type TarcilProc } from '../support/procs.ts';
import { taskRecord } from '../support/task-records.ts';

let etcd: EtcdProcess;
let store: ClusterStore;
let dir: string;
const procs: TarcilProc[] = [];
beforeAll(async () => {
  etcd = await startEtcd({ bin: process.env.TARCIL_TEST_ETCD_BIN });
  store = await openStore(etcd.endpoint.replace('http://', 'etcd://'));
  dir = mkdtempSync(join(tmpdir(), 'tarcil-frozen-'));
});
afterAll(async () => {
  for (const p of procs) if (p.child.pid !== undefined && p.child.exitCode === null) p.child.kill('SIGCONT');
  await Promise.all(procs.map((p) => p.kill('SIGKILL')));
  await store?.close();
  await etcd?.stop();
  rmSync(dir, { recursive: true, force: true });
});

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** One line per start (S) and end (E) of the task's process: attempt and node. */
const SCRIPT = `#!/bin/sh
echo "S $TARCIL_ATTEMPT $TARCIL_SERVER" >> "$RUNS"
sleep "$1"
echo "E $TARCIL_ATTEMPT $TARCIL_SERVER" >> "$RUNS"
`;

const TTL_S = 3;
const GRACE_MS = 2000;

describe('a task that succeeds while its monitor is frozen past its lease and grace', () => {
  it('has its success recorded by its supervisor, and does not run again', async () => {
    const prefix = `/frozen-${Date.now()}/`;
    const keys = new Keys(prefix);
    const url = etcd.endpoint.replace('http://', 'etcd://');
    const script = join(dir, 'task.sh');
    const record = join(dir, 'runs.txt');
    writeFileSync(script, SCRIPT, { mode: 0o755 });
    writeFileSync(record, '');
    const common = ['--store', url, '--prefix', prefix, '--lease-ttl', String(TTL_S)];
    const monitors = new Map<string, TarcilProc>();
    for (const node of ['n0', 'n1']) {
      const m = tarcil([
        'monitor',
        ...common,
        '--node',
        node,
        '--platform',
        'r3-2xlarge',
        '--rus',
        '1',
        '--executor',
        'process',
        '--log-dir',
        join(dir, node),
        '--disconnect-grace',
        `${GRACE_MS}ms`,
      ]);
      procs.push(m);
      monitors.set(node, m);
    }
    const server = tarcil(['server', ...common, '--agents', '1', '--port', '0', '--name', 'fe']);
    procs.push(server);
    for (const m of monitors.values()) await m.waitFor(/listening on/);
    const port = Number((await server.waitFor(/listening on [\d.]+:(\d+)/))[1]);
    const client = schedulerClient(`127.0.0.1:${port}`);
    const spec = { name: 'frozen', profile: 'spark-lr', tasks: 1, maxQueueMs: 0, command: { argv: [script, '1.5'], env: { RUNS: record } } };
    const { jobId } = await submit(client, { specJson: JSON.stringify(spec) }, 5000);
    const runs = (): string[] => readFileSync(record, 'utf8').trim().split('\n').filter(Boolean);

    let first: string | undefined;
    for (const end = Date.now() + 15_000; !first && Date.now() < end; await sleep(20)) first = runs()[0];
    expect(first, 'the task started').toMatch(/^S 0 n[01]$/);
    const node = first!.split(' ')[2]!;
    const frozen = monitors.get(node)!;
    frozen.child.kill('SIGSTOP');
    const frozenAt = Date.now();
    try {
      // Frozen for twice the lease + grace: long past the time the front-end may place the task
      // again (lease expiry + grace + margin). The task ends 1.5 s in, well before the node's deadline.
      const until = frozenAt + 2 * (TTL_S * 1000 + GRACE_MS);
      let job: LiveJobRecord | undefined;
      let endedWhileFrozen = false;
      while (Date.now() < until) {
        job = parseJson<LiveJobRecord>(await store.get(keys.job(jobId)));
        if (job?.state === 'succeeded') endedWhileFrozen = true;
        await sleep(200);
      }
      const task = await taskRecord(store, keys, jobId, 0);
      const why = `runs: ${JSON.stringify(runs())}, task: ${JSON.stringify(task)}, job: ${job?.state}`;
      expect(task, why).toMatchObject({ state: 'succeeded', attempt: 0, exitCode: 0, ru: { server: node } });
      expect(endedWhileFrozen, why).toBe(true);
      expect(runs(), why).toEqual([`S 0 ${node}`, `E 0 ${node}`]);
    } finally {
      frozen.child.kill('SIGCONT');
    }
    // The monitor comes back: it reports what it already knew (settled), runs nothing again.
    await sleep(3000);
    expect(runs()).toEqual([`S 0 ${node}`, `E 0 ${node}`]);
    expect(await taskRecord(store, keys, jobId, 0)).toMatchObject({ state: 'succeeded', attempt: 0 });
    expect(frozen.child.exitCode).toBe(null);
    client.close();
    await Promise.all([...monitors.values(), server].map((p) => p.kill()));
  }, 90_000);
});
