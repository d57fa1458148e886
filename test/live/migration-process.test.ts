/**
 * A move with real processes: the process executor pins each task to its RU's core and measures
 * its rate from its CPU time. A server of 4 RUs on this 2-core machine puts two RUs on each core,
 * so a CPU-bound task next to another on the same core runs at about half its rate. The migratable
 * task is moved once its wait is over; every start of the task's script checks that no earlier
 * attempt's process is still alive, so an overlap of the two copies would be written down.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync, chmodSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { schedulerClient } from '../../src/cli/grpc-clients.ts';
import { startScheduler } from '../../src/frontend/runtime.ts';
import { startMonitor } from '../../src/node/runtime.ts';
import { loadCatalog } from '../../src/model/catalog.ts';
import type { ServerSpec } from '../../src/model/types.ts';
import { Keys } from '../../src/state/keys.ts';
import type { LiveServerRecord } from '../../src/state/live-records.ts';
import { parseJson, type PlacedRuRecord } from '../../src/state/records.ts';
import { openStore } from '../../src/store/index.ts';
import type { ClusterStore } from '../../src/store/types.ts';
import { SystemClock } from '../../src/util/clock.ts';
import { createLogger } from '../../src/util/log.ts';
import { SeededRng } from '../../src/util/rng.ts';
import { startEtcd, type EtcdProcess } from '../support/etcd.ts';
import { getJob, submit, waitFinal } from '../support/live.ts';
import { taskRecord } from '../support/task-records.ts';

const catalog = loadCatalog();
const clock = new SystemClock();
const log = createLogger('test');
const platform = Object.keys(catalog.platforms)[0] as string;
const perf = Object.fromEntries(Object.keys(catalog.platforms).map((p) => [p, 1]));
const quiet = { name: 'quiet', family: 'test', caused: [0, 0, 0, 0, 0, 0, 0, 0, 0, 0], platformPerf: perf };

/** Burns CPU for $1 seconds of wall time; the first line checks the earlier attempts are gone. */
const SCRIPT = `#!/bin/sh
for p in $(grep '^S' "$RUNS" 2>/dev/null | awk '{print $3}'); do
  # Still running: its /proc entry is there and it is not a zombie (dead, not yet reaped).
  if [ -r "/proc/$p/stat" ] && ! awk '{ if ($3 == "Z" || $3 == "X") exit 0; exit 1 }' "/proc/$p/stat" 2>/dev/null; then
    echo "OVERLAP $TARCIL_ATTEMPT $p" >> "$RUNS"
  fi
done
echo "S $TARCIL_ATTEMPT $$" >> "$RUNS"
end=$(( $(date +%s) + $1 ))
while [ "$(date +%s)" -lt "$end" ]; do i=0; while [ $i -lt 2000 ]; do i=$((i+1)); done; done
echo "E $TARCIL_ATTEMPT $$" >> "$RUNS"
`;

let etcd: EtcdProcess;
let store: ClusterStore;
let dir: string;
beforeAll(async () => {
  etcd = await startEtcd({ bin: process.env.TARCIL_TEST_ETCD_BIN });
  store = await openStore(etcd.endpoint.replace('http://', 'etcd://'));
  dir = mkdtempSync(join(tmpdir(), 'tarcil-move-proc-'));
});
afterAll(async () => {
  await store?.close();
  await etcd?.stop();
  rmSync(dir, { recursive: true, force: true });
});

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
const FINAL = new Set(['succeeded', 'failed', 'cancelled']);

describe('moving a slow task that runs as a process', () => {
  it('moves a CPU-bound task sharing its core, and the two copies never run at once', { timeout: 90_000 }, async () => {
    const keys = new Keys('/mig-proc/');
    const script = join(dir, 'burn.sh');
    writeFileSync(script, SCRIPT);
    chmodSync(script, 0o755);
    const runs = join(dir, 'runs.txt');
    const servers: ServerSpec[] = [
      { id: 'p0', platform, rack: 'r0', rus: 4, speed: 1, attributes: { zone: 'a' } },
      { id: 'p1', platform, rack: 'r0', rus: 2, speed: 1, attributes: { zone: 'b' } },
    ];
    // Blocks on (not left to DEFAULT_RUNTIME): the test follows the local action as well as the move.
    const monitors = await Promise.all(
      servers.map((s) =>
        startMonitor({
          store,
          keys,
          clock,
          log,
          server: s,
          executor: 'process',
          cpuRate: true,
          logDir: join(dir, s.id),
          host: '127.0.0.1',
          port: 0,
          leaseTtlSeconds: 3,
          loadThreshold: 0.7,
          block: true,
        }),
      ),
    );
    const sched = await startScheduler({
      name: 'mp',
      store,
      keys,
      catalog,
      clock,
      rng: new SeededRng(9),
      log,
      agents: 1,
      host: '127.0.0.1',
      port: 0,
      leaseTtlSeconds: 3,
      housekeeping: false,
      runtime: { moveAfterMs: 2500 },
    });
    const c = schedulerClient(`127.0.0.1:${sched.port}`);
    try {
      // p1 is held for a few seconds by sleepers; three CPU burners fill p0 but one RU.
      const filler = await submit(c, {
        specJson: JSON.stringify({ name: 'sleepers', profile: quiet, tasks: 2, command: { argv: ['sleep', '4'] }, constraints: { attributes: { zone: 'b' } } }),
      });
      const burners = await submit(c, {
        specJson: JSON.stringify({
          name: 'burners',
          profile: quiet,
          tasks: 3,
          command: { argv: [script, '20'], env: { RUNS: join(dir, 'other.txt') } },
          constraints: { attributes: { zone: 'a' } },
        }),
      });
      // Every one of their tasks running, so that the only free RU is on p0.
      for (const [id, n] of [
        [filler.jobId, 2],
        [burners.jobId, 3],
      ] as const) {
        for (let i = 0; i < 100 && ((await getJob(c, id)).taskStates.running ?? 0) < n; i++) await sleep(100);
        expect((await getJob(c, id)).taskStates.running).toBe(n);
      }
      const victim = await submit(c, {
        specJson: JSON.stringify({ name: 'victim', profile: quiet, tasks: 1, migratable: true, command: { argv: [script, '8'], env: { RUNS: runs } } }),
      });
      // Until it ends: p0's monitor blocks its server (the local action) while its tasks run slow.
      let blocked = false;
      for (let i = 0; i < 600 && !FINAL.has((await getJob(c, victim.jobId)).state); i++) {
        blocked ||= parseJson<LiveServerRecord>(await store.get(keys.server('p0')))?.blocked === true;
        await sleep(100);
      }
      expect(blocked).toBe(true);
      const done = await waitFinal(c, victim.jobId, 1000);
      expect(done.state).toBe('succeeded');
      // No RU still holds the task (the old one was freed, the new one released at its end).
      const held = (await store.range(keys.rus())).kvs.filter((kv) => parseJson<PlacedRuRecord>(kv)?.job === victim.jobId);
      expect(held).toEqual([]);
      const rec = await taskRecord(store, keys, victim.jobId, 0);
      expect(rec?.previous?.[0]?.ru?.server).toBe('p0');
      expect(rec?.previous?.[0]?.message).toMatch(/^moved: ran at 0\.\d\d of its expected rate on p0/);
      expect(rec?.ru?.server).toBe('p1');
      expect(rec?.attempt).toBe(1);
      const lines = readFileSync(runs, 'utf8').trim().split('\n');
      // Attempt 0 started and was stopped (no end line); attempt 1 started after it was gone, and ended.
      expect(lines.filter((l) => l.startsWith('OVERLAP'))).toEqual([]);
      expect(lines.map((l) => l.split(' ').slice(0, 2).join(' '))).toEqual(['S 0', 'S 1', 'E 1']);
      expect(monitors[0]!.monitor.snapshot().stats.movedOut).toBe(1);
      await new Promise<void>((resolve) => c.CancelJob({ jobId: burners.jobId }, () => resolve()));
    } finally {
      c.close();
      await sched.close();
      await Promise.all(monitors.map((m) => m.close()));
    }
  });
});
