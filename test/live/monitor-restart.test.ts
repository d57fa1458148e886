/**
 * A `tarcil monitor --executor process` SIGKILLed while its task runs, and started again on the
 * same directories. Its task's process outlives it (its own process group): if the task ends by
 * itself before the monitor is back, the restarted monitor records the exit code the task's shell
 * wrote, and the task does not run again; if it is still running, the restarted monitor stops it
 * before recording it lost, so its next run never overlaps it.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { schedulerClient } from '../../src/cli/grpc-clients.ts';
import type { SchedulerClient } from '../../src/rpc/gen/tarcil/v1/Scheduler.ts';
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
  dir = mkdtempSync(join(tmpdir(), 'tarcil-restart-'));
});
afterAll(async () => {
  await Promise.all(procs.map((p) => p.kill('SIGKILL')));
  await store?.close();
  await etcd?.stop();
  rmSync(dir, { recursive: true, force: true });
});

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

async function until<T>(f: () => Promise<T | undefined>, ms: number, what: string): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await f();
    if (v !== undefined) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(100);
  }
}

/** One line per start (S) and end (E) of the task's process, with its attempt. */
const SCRIPT = `#!/bin/sh
echo "S $TARCIL_ATTEMPT $$" >> "$RUNS"
sleep "$1"
echo "E $TARCIL_ATTEMPT $$" >> "$RUNS"
`;

describe('a process-executor monitor SIGKILLed and started again', () => {
  it.each([
    {
      name: 'the task ended by itself while the monitor was down: its exit code is recorded, it does not run again',
      sleepS: 1,
      downMs: 3000,
      runs: ['S 0', 'E 0'],
      attempts: 1,
    },
    {
      name: 'the task was still running when the monitor came back: it is stopped, then placed again',
      sleepS: 6,
      downMs: 500,
      runs: ['S 0', 'S 1', 'E 1'],
      attempts: 2,
    },
  ])(
    '$name',
    async ({ sleepS, downMs, runs, attempts }) => {
      const prefix = `/restart-${attempts}-${Date.now()}/`;
      const keys = new Keys(prefix);
      const url = etcd.endpoint.replace('http://', 'etcd://');
      const work = join(dir, String(attempts));
      const script = join(dir, `task-${attempts}.sh`);
      const record = join(dir, `runs-${attempts}.txt`);
      writeFileSync(script, SCRIPT, { mode: 0o755 });
      writeFileSync(record, '');
      const common = ['--store', url, '--prefix', prefix, '--lease-ttl', '3'];
      const monitorArgs = [
        'monitor',
        ...common,
        '--node',
        'n0',
        '--platform',
        'r3-2xlarge',
        '--rus',
        '2',
        '--executor',
        'process',
        '--log-dir',
        join(work, 'logs'),
        '--disconnect-grace',
        '2s',
      ];
      let monitor = tarcil(monitorArgs);
      procs.push(monitor);
      const server = tarcil(['server', ...common, '--agents', '1', '--port', '0', '--name', 'fe']);
      procs.push(server);
      await monitor.waitFor(/listening on/);
      const port = Number((await server.waitFor(/listening on [\d.]+:(\d+)/))[1]);
      const client: SchedulerClient = schedulerClient(`127.0.0.1:${port}`);
      const spec = { name: 'restart', profile: 'spark-lr', tasks: 1, maxQueueMs: 0, command: { argv: [script, String(sleepS)], env: { RUNS: record } } };
      const { jobId } = await submit(client, { specJson: JSON.stringify(spec) }, 5000);
      await until(() => Promise.resolve(readFileSync(record, 'utf8').includes('S 0') ? true : undefined), 15_000, 'the task to start');
      await monitor.kill('SIGKILL');
      await sleep(downMs);
      monitor = tarcil(monitorArgs);
      procs.push(monitor);
      await monitor.waitFor(/listening on/);
      const job = await until(
        async () => {
          const rec = parseJson<LiveJobRecord>(await store.get(keys.job(jobId)));
          return rec && ['succeeded', 'failed', 'cancelled'].includes(rec.state) ? rec : undefined;
        },
        30_000,
        'the job to end',
      );
      expect(job.state).toBe('succeeded');
      const lines = readFileSync(record, 'utf8')
        .trim()
        .split('\n')
        .map((l) => l.split(' ').slice(0, 2).join(' '));
      expect(lines).toEqual(runs);
      const task = await taskRecord(store, keys, jobId, 0);
      expect(task?.attempt).toBe(attempts - 1);
      expect((task?.previous ?? []).length).toBe(attempts - 1);
      client.close();
      await Promise.all([monitor.kill(), server.kill()]);
    },
    90_000,
  );
});
