/**
 * Lists say what they left out: ListJobs and ListAudit count what matched beside the page they
 * return, and with ACLs on a token that may read only some namespaces gets the page and the count
 * of those alone (a count over all would tell how many jobs it may not see). `tarcil audit` says
 * "N of M audit records" when its limit cut the list.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { auditCommand } from '../../src/cli/acl-commands.ts';
import { schedulerClient } from '../../src/cli/grpc-clients.ts';
import type { CreatedToken__Output } from '../../src/rpc/gen/tarcil/v1/CreatedToken.ts';
import type { ListAuditResponse__Output } from '../../src/rpc/gen/tarcil/v1/ListAuditResponse.ts';
import type { ListJobsResponse__Output } from '../../src/rpc/gen/tarcil/v1/ListJobsResponse.ts';
import type { SchedulerClient } from '../../src/rpc/gen/tarcil/v1/Scheduler.ts';
import { startScheduler, type SchedulerProcess } from '../../src/frontend/runtime.ts';
import { loadCatalog } from '../../src/model/catalog.ts';
import { Keys } from '../../src/state/keys.ts';
import { MemoryStore } from '../../src/store/memory.ts';
import { SystemClock } from '../../src/util/clock.ts';
import { createLogger } from '../../src/util/log.ts';
import { SeededRng } from '../../src/util/rng.ts';

const store = new MemoryStore();
let sched: SchedulerProcess;
let address = '';
const clients: SchedulerClient[] = [];
const as = (token?: string): SchedulerClient => {
  const c = schedulerClient(address, undefined, token);
  clients.push(c);
  return c;
};

beforeAll(async () => {
  sched = await startScheduler({
    name: 'totals',
    store,
    keys: new Keys('/totals/'),
    catalog: loadCatalog(),
    clock: new SystemClock(),
    rng: new SeededRng(1),
    log: createLogger('test'),
    agents: 1,
    host: '127.0.0.1',
    port: 0,
    leaseTtlSeconds: 3,
    acl: true,
  });
  address = `127.0.0.1:${sched.port}`;
});
afterAll(async () => {
  for (const c of clients) c.close();
  await sched?.close();
  await store.close();
});

function call<T>(f: (cb: (err: Error | null, res?: T) => void) => void): Promise<T> {
  return new Promise((resolve, reject) => f((err, res) => (err || res === undefined ? reject(err ?? new Error('no answer')) : resolve(res))));
}

describe('list totals', () => {
  it('ListJobs over every namespace counts only what the token may read; ListAudit counts what matched', async () => {
    const admin = (await call<CreatedToken__Output>((cb) => as().AclBootstrap({ name: 'root' }, cb))).secret;
    const a = as(admin);
    for (const name of ['team-a', 'team-b']) await call((cb) => a.PutNamespace({ name }, cb));
    const reader = (
      await call<CreatedToken__Output>((cb) => a.CreateToken({ name: 'reader', policyJson: JSON.stringify({ namespaces: { 'team-a': ['read'] } }) }, cb))
    ).secret;
    // No node has registered: the jobs wait, which is all a list needs.
    const spec = JSON.stringify({ name: 'listed', profile: 'spark-lr', tasks: 1, durationMs: 1000 });
    for (const [ns, n] of [
      ['team-a', 3],
      ['team-b', 4],
    ] as const) {
      for (let i = 0; i < n; i++) await call((cb) => a.SubmitJob({ specJson: spec, namespace: ns }, cb));
    }
    const all = await call<ListJobsResponse__Output>((cb) => a.ListJobs({ allNamespaces: true, limit: 2 }, cb));
    expect([all.jobs.length, all.total]).toEqual([2, 7]);
    const mine = await call<ListJobsResponse__Output>((cb) => as(reader).ListJobs({ allNamespaces: true, limit: 2 }, cb));
    expect(mine.jobs.map((j) => j.namespace)).toEqual(['team-a', 'team-a']);
    expect(mine.total).toBe(3);
    const everyOne = await call<ListJobsResponse__Output>((cb) => as(reader).ListJobs({ allNamespaces: true }, cb));
    expect([everyOne.jobs.length, everyOne.total]).toEqual([3, 3]);

    const audit = await call<ListAuditResponse__Output>((cb) => a.ListAudit({ limit: 2 }, cb));
    // The bootstrap, two namespaces, a token and seven submissions, at least.
    expect(audit.records.length).toBe(2);
    expect(audit.total).toBeGreaterThanOrEqual(11);
    const full = await call<ListAuditResponse__Output>((cb) => a.ListAudit({}, cb));
    expect(full.records.length).toBe(full.total);
    const lines: string[] = [];
    await auditCommand({ server: address, timeout: 5000, token: admin, limit: 2 }, (l) => lines.push(l));
    expect(lines.at(-1)).toMatch(new RegExp(`^2 of (\\d+) audit records \\(the newest\\); --limit N \\(at most 100,000\\) or --since to see others$`));
    expect(Number(/of (\d+)/.exec(lines.at(-1) ?? '')?.[1])).toBeGreaterThanOrEqual(audit.total);
  });
});
