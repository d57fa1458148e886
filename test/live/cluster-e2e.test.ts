import { audit as replayAudit, history } from '../support/audit.ts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LiveJobRecord } from '../../src/state/live-records.ts';
import { parseJson } from '../../src/state/records.ts';
import { schedulerClient } from '../../src/cli/grpc-clients.ts';
import type { SchedulerClient } from '../../src/rpc/gen/tarcil/v1/Scheduler.ts';
import { openStore } from '../../src/store/index.ts';
import { Keys } from '../../src/state/keys.ts';
import { startEtcd, type EtcdProcess } from '../support/etcd.ts';
import { submit } from '../support/live.ts';
import { tarcil, type TarcilProc } from '../support/procs.ts';
import { taskRecords } from '../support/task-records.ts';

/**
 * The live cluster as it is deployed: one etcd, two `tarcil server` processes, four `tarcil
 * monitor` processes (simulated executor), 200 jobs over gRPC. Mid-run one server and one
 * monitor are killed with SIGKILL. Afterwards etcd's own history is audited.
 */
const JOBS = 200;
const MONITORS = 4;
const RUS = 8;
const TTL = 3;
const PROFILES = ['spark-lr', 'hadoop-map', 'memcached', 'tpch-scan', 'spec-mcf', 'parsec-canneal'];

let etcd: EtcdProcess;
const procs: TarcilProc[] = [];
beforeAll(async () => {
  etcd = await startEtcd({ bin: process.env.TARCIL_TEST_ETCD_BIN });
});
afterAll(async () => {
  await Promise.all(procs.map((p) => p.kill('SIGKILL')));
  await etcd?.stop();
});

describe('live cluster: 2 servers, 4 monitors, 1 etcd, processes killed mid-run', () => {
  it('finishes every acknowledged job exactly once, never runs a task twice, leaves no orphan', async () => {
    const url = etcd.endpoint.replace('http://', 'etcd://');
    const prefix = `/e2e-${Date.now()}/`;
    const keys = new Keys(prefix);
    const audit = await openStore(url);
    const startRev = await audit.revision();
    const common = ['--store', url, '--prefix', prefix, '--lease-ttl', String(TTL)];

    const monitors = Array.from({ length: MONITORS }, (_, i) =>
      tarcil([
        'monitor',
        ...common,
        '--node',
        `m${i}`,
        '--platform',
        'r3-2xlarge',
        '--rus',
        String(RUS),
        '--rack',
        `r${i % 2}`,
        '--executor',
        'simulated',
        '--disconnect-grace',
        '3s',
      ]),
    );
    procs.push(...monitors);
    const servers = [0, 1].map((i) => tarcil(['server', ...common, '--agents', '2', '--port', '0', '--name', `fe${i}`]));
    procs.push(...servers);
    await Promise.all(monitors.map((m) => m.waitFor(/listening on/)));
    const ports = await Promise.all(servers.map(async (s) => Number((await s.waitFor(/listening on [\d.]+:(\d+)/))[1])));
    const clients: SchedulerClient[] = ports.map((p) => schedulerClient(`127.0.0.1:${p}`));

    const acked: string[] = [];
    let refused = 0;
    const inflight: Promise<void>[] = [];
    let killedAt = -1;
    for (let i = 0; i < JOBS; i++) {
      if (i === JOBS / 2) {
        // Kill one front-end (owner of about half the running jobs) and one node, without warning.
        killedAt = acked.length;
        await Promise.all([servers[0]!.kill('SIGKILL'), monitors[0]!.kill('SIGKILL')]);
      }
      const c = clients[i >= JOBS / 2 ? 1 : i % 2]!;
      const spec = {
        name: `e2e-${i}`,
        profile: PROFILES[i % PROFILES.length],
        tasks: 1 + (i % 4),
        durationMs: 300 + ((i * 37) % 500),
        maxQueueMs: 2000,
      };
      inflight.push(
        submit(c, { specJson: JSON.stringify(spec) }, 5000).then(
          (r) => {
            acked.push(r.jobId);
          },
          () => {
            refused++; // not acknowledged: the client knows it was not accepted
          },
        ),
      );
      await new Promise((r) => setTimeout(r, 25));
    }
    await Promise.all(inflight);
    expect(killedAt).toBeGreaterThan(50);
    expect(acked.length).toBeGreaterThanOrEqual(JOBS - 10);

    // Wait for every acknowledged job to reach a final state (read from etcd, the truth).
    const deadline = Date.now() + 75_000;
    let pending = acked.length;
    while (Date.now() < deadline) {
      const jobs = await audit.range(keys.jobs());
      const byId = new Map(jobs.kvs.map((kv) => [keys.tail(keys.jobs(), kv.key) ?? '', parseJson<LiveJobRecord>(kv)]));
      const ids = new Set([...acked, ...byId.keys()]);
      pending = [...ids].filter((id) => !['succeeded', 'failed', 'cancelled'].includes(byId.get(id)?.state ?? '')).length;
      if (pending === 0) break;
      process.stdout.write(`[e2e] ${pending} of ${acked.length} jobs not final yet\n`);
      await new Promise((r) => setTimeout(r, 500));
    }
    expect(pending, `jobs not final; server output:\n${servers[1]!.output().slice(-3000)}`).toBe(0);
    // Let trailing writes (reports, epochs) settle before the audit reads history.
    await new Promise((r) => setTimeout(r, 500));

    // 1. Every acknowledged job succeeded, and reached its final state exactly once.
    const jobEvents = await history(audit, keys.jobs(), startRev + 1);
    const finals = new Map<string, number>();
    for (const ev of jobEvents) {
      const rec = parseJson<LiveJobRecord>(ev.kv);
      const id = keys.tail(keys.jobs(), ev.kv.key)!;
      if (rec && ['succeeded', 'failed', 'cancelled'].includes(rec.state)) finals.set(id, (finals.get(id) ?? 0) + 1);
    }
    const jobs = await audit.range(keys.jobs());
    const states = new Map(jobs.kvs.map((kv) => [keys.tail(keys.jobs(), kv.key)!, parseJson<LiveJobRecord>(kv)!]));
    for (const id of acked) {
      expect(states.get(id)?.state, id).toBe('succeeded');
      expect(finals.get(id), id).toBe(1);
    }
    // Jobs the killed front-end owned were adopted and finished by the survivor.
    const rescheduled = [...states.values()].reduce((a, j) => a + (j.rescheduled ?? 0), 0);

    // 2. Every task succeeded.
    const taskRecs = await taskRecords(audit, keys);
    // A job whose acknowledgement was lost with the killed front-end may exist too (it was
    // persisted before the kill): it must also have finished, like every other stored job.
    for (const [id, j] of states) expect(j.state, id).toBe('succeeded');
    const expectedTasks = [...states.values()].reduce((a, j) => a + j.spec.tasks, 0);
    expect(taskRecs.length).toBe(expectedTasks);
    expect(taskRecs.filter((t) => t.state !== 'succeeded')).toEqual([]);

    // 3. Replay every RU write: an RU becomes busy only from free (or from nothing, after its node
    //    registered), and at no revision do two RUs hold the same task.
    // 4. No task ran twice at once: per task, a 'running' record is always followed by an end
    //    (final or lost) before the next attempt starts running.
    const findings = await replayAudit(audit, keys, startRev);
    expect(findings.doubleBooked).toBe(0);
    expect(findings.heldTwice).toBe(0);
    expect(findings.overlappingRuns).toBe(0);

    // 5. No orphans: no owner keys, no queue entries, no busy RU, no RU of a departed node.
    const [owners, queue, rus, srv] = await Promise.all([
      audit.range(keys.owners()),
      audit.range(keys.queue()),
      audit.range(keys.rus()),
      audit.range(keys.servers()),
    ]);
    expect(owners.kvs.map((kv) => kv.key)).toEqual([]);
    expect(queue.kvs.map((kv) => kv.key)).toEqual([]);
    expect(rus.kvs.filter((kv) => parseJson<{ state: string }>(kv)?.state !== 'free').map((kv) => kv.value)).toEqual([]);
    const live = new Set(srv.kvs.map((kv) => keys.tail(keys.servers(), kv.key)));
    expect(live.has('m0')).toBe(false);
    expect(rus.kvs.filter((kv) => !live.has(keys.parseRu(kv.key)?.server)).map((kv) => kv.key)).toEqual([]);

    process.stdout.write(
      `[e2e] acknowledged ${acked.length} of ${JOBS} (refused ${refused}), ${expectedTasks} tasks, tasks lost and rescheduled ${rescheduled}\n`,
    );

    for (const c of clients) c.close();
    // Graceful shutdown of the survivors: they revoke their leases and leave nothing behind.
    await Promise.all([servers[1]!.kill('SIGTERM'), ...monitors.slice(1).map((m) => m.kill('SIGTERM'))]);
    const after = await Promise.all([audit.range(keys.owners()), audit.range(keys.servers())]);
    expect(after[0].kvs.length).toBe(0);
    expect(after[1].kvs.length).toBe(0);
    await audit.close();
  }, 150_000);
});
