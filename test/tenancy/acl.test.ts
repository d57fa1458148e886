/**
 * Access control over gRPC on etcd: every Scheduler RPC × every kind of caller gets the status the
 * auth layer documents (src/frontend/auth.ts), a refused call writes nothing but its audit record,
 * bootstrap works once, secrets are never stored, the audit trail says who did what, and the
 * CLI's --token reaches the front-end. Then ACLs off (anonymous audit records), client
 * certificates standing for a token, and the retention of audit records.
 */
import * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { aclBootstrapCommand, auditCommand, readPolicy, tokenCreateCommand, tokenListCommand, tokenRevokeCommand } from '../../src/cli/acl-commands.ts';
import { jobsCommand } from '../../src/cli/client.ts';
import { schedulerClient } from '../../src/cli/grpc-clients.ts';
import type { SchedulerClient } from '../../src/rpc/gen/tarcil/v1/Scheduler.ts';
import { startScheduler, type SchedulerProcess } from '../../src/frontend/runtime.ts';
import type { MonitorProcess } from '../../src/node/runtime.ts';
import { loadProtos } from '../../src/rpc/proto.ts';
import { Keys } from '../../src/state/keys.ts';
import { RetentionSweeper } from '../../src/state/retention.ts';
import { openStore } from '../../src/store/index.ts';
import { MemoryStore } from '../../src/store/memory.ts';
import type { ClusterStore } from '../../src/store/types.ts';
import { allows, allowsAny, NAMESPACE_VERBS, parsePolicy } from '../../src/tenancy/acl.ts';
import { SystemClock } from '../../src/util/clock.ts';
import { TarcilError } from '../../src/util/errors.ts';
import { createLogger } from '../../src/util/log.ts';
import { makePki, type TestPki } from '../support/tls.ts';
import { startSimNode, startTestScheduler } from '../support/live.ts';

const clock = new SystemClock();
const log = createLogger('acl', 'silent');
/** Status codes as plain numbers (a call's code is a number). */
const S: Record<keyof typeof grpc.status, number> = grpc.status;
const spec = (name: string, ns: string): string => JSON.stringify({ name, profile: 'spark-lr', tasks: 1, durationMs: 20, namespace: ns });

type Cb = (e: grpc.ServiceError | null, r?: Record<string, unknown>) => void;
type Methods = Record<string, (req: object, opts: grpc.CallOptions, cb: Cb) => unknown>;

/** A unary call: its status code and answer. */
function unary(c: SchedulerClient, rpc: string, req: object): Promise<{ code: number; res?: Record<string, unknown>; details?: string }> {
  return new Promise((resolve) => {
    (c as unknown as Methods)[rpc]!.call(c, req, { deadline: Date.now() + 10_000 }, (e, r) =>
      resolve(e ? { code: e.code, details: e.details } : { code: S.OK, ...(r ? { res: r } : {}) }),
    );
  });
}

/** A server stream: OK once the first message arrives (the call is then cancelled), else its status. */
function stream(c: SchedulerClient, rpc: string, req: object): Promise<{ code: number; details?: string }> {
  return new Promise((resolve) => {
    const call = (c as unknown as Record<string, (req: object, opts: grpc.CallOptions) => grpc.ClientReadableStream<unknown>>)[rpc]!.call(c, req, {
      deadline: Date.now() + 10_000,
    });
    let done = false;
    const finish = (r: { code: number; details?: string }): void => {
      if (done) return;
      done = true;
      resolve(r);
      call.cancel();
    };
    call.on('data', () => finish({ code: S.OK }));
    call.on('error', (e: grpc.ServiceError) => finish({ code: e.code, details: e.details }));
    call.on('end', () => finish({ code: S.OK }));
  });
}

async function ok<T = Record<string, unknown>>(c: SchedulerClient, rpc: string, req: object): Promise<T> {
  const r = await unary(c, rpc, req);
  if (r.code !== S.OK) throw new Error(`${rpc}: status ${r.code}: ${r.details}`);
  return r.res as T;
}

describe('ACLs on (etcd)', () => {
  let store: ClusterStore;
  let sched: SchedulerProcess;
  let monitor: MonitorProcess;
  const keys = new Keys(`/acl-${Date.now()}/`);
  let addr = '';
  const clients: SchedulerClient[] = [];
  const as = (token?: string): SchedulerClient => {
    const c = schedulerClient(addr, undefined, token);
    clients.push(c);
    return c;
  };
  const secrets: string[] = [];
  const tokens: Record<string, string> = {};
  let jobA = '';

  const snapshot = async (): Promise<Map<string, number>> => new Map((await store.range(keys.prefix)).kvs.map((kv) => [kv.key, kv.modRevision]));

  beforeAll(async () => {
    store = await openStore(inject('etcdEndpoint').replace('http://', 'etcd://'));
    monitor = await startSimNode({ store, keys, clock, log });
    sched = await startTestScheduler({ name: 'acl', store, keys, clock, log, agents: 1, seed: 5 }, { acl: true });
    addr = `127.0.0.1:${sched.port}`;
  });
  afterAll(async () => {
    for (const c of clients) c.close();
    await sched?.close();
    await monitor?.close();
    await store?.close();
  });

  it('two racing bootstraps give one admin token; a third is refused', async () => {
    const anon = as();
    const [a, b] = await Promise.all([unary(anon, 'AclBootstrap', { name: 'root' }), unary(anon, 'AclBootstrap', { name: 'root' })]);
    expect([a.code, b.code].sort()).toEqual([S.OK, S.FAILED_PRECONDITION].sort());
    const won = (a.code === S.OK ? a : b).res as { secret: string; token: { accessor: string } };
    expect(won.secret).toMatch(/^[0-9a-f]{16}\.[A-Za-z0-9_-]{43}$/);
    expect(won.secret.startsWith(`${won.token.accessor}.`)).toBe(true);
    tokens.admin = won.secret;
    secrets.push(won.secret);
    expect((await store.range(keys.tokens())).kvs).toHaveLength(1);
    expect((await unary(as(won.secret), 'AclBootstrap', {})).code).toBe(S.FAILED_PRECONDITION);
  });

  it('sets up namespaces, tokens and a job through the admin token', async () => {
    const admin = as(tokens.admin);
    await ok(admin, 'PutNamespace', { name: 'team-a' });
    await ok(admin, 'PutNamespace', { name: 'team-b' });
    const make = async (name: string, policy: object, ttlMs = 0): Promise<string> => {
      const r = await ok<{ secret: string }>(admin, 'CreateToken', { name, policyJson: JSON.stringify(policy), ttlMs });
      secrets.push(r.secret);
      return r.secret;
    };
    tokens.reader = await make('reader', { namespaces: { 'team-a': ['read'] } });
    tokens.submitter = await make('submitter', { namespaces: { 'team-a': ['submit', 'read', 'cancel'] } });
    tokens.other = await make('other', { namespaces: { 'team-b': ['submit', 'read', 'cancel'] } });
    tokens.expired = await make('expired', { cluster: ['admin'] }, 1000);
    tokens.revoked = await make('revoked', { cluster: ['admin'] });
    tokens.forged = `${tokens.admin!.split('.')[0]}.${'A'.repeat(43)}`;
    tokens.unknown = `0123456789abcdef.${'B'.repeat(43)}`;
    await ok(admin, 'RevokeToken', { accessor: tokens.revoked.split('.')[0] });
    jobA = (await ok<{ jobId: string }>(as(tokens.submitter), 'SubmitJob', { specJson: spec('a', 'team-a') })).jobId;
    await ok(as(tokens.other), 'SubmitJob', { specJson: spec('b', 'team-b') });
    // The job finishes and the expired token's second passes: nothing of the cell changes below but what the calls do.
    for (let i = 0; i < 100; i++) {
      const j = await ok<{ state: string }>(admin, 'GetJob', { jobId: jobA });
      if (j.state === 'succeeded') break;
      await new Promise((r) => setTimeout(r, 50));
    }
    await new Promise((r) => setTimeout(r, 1200));
  });

  // Expected status per RPC for each kind of caller; AUTHN = UNAUTHENTICATED, DENY = PERMISSION_DENIED.
  const AUTHN = S.UNAUTHENTICATED;
  const DENY = S.PERMISSION_DENIED;
  const PRE = S.FAILED_PRECONDITION;
  // forged: the admin token's accessor with another secret; unknown: a well-formed token never made.
  type Who = 'none' | 'forged' | 'unknown' | 'expired' | 'revoked' | 'other' | 'reader' | 'submitter' | 'admin';
  const WHO: Who[] = ['none', 'forged', 'unknown', 'expired', 'revoked', 'other', 'reader', 'submitter', 'admin'];
  const UNAUTH: Who[] = ['none', 'forged', 'unknown', 'expired', 'revoked'];
  interface Row {
    rpc: string;
    stream?: boolean;
    mutates?: boolean;
    req: () => object;
    /** Status for other, reader, submitter, admin (callers without a valid token get UNAUTHENTICATED, AclBootstrap aside). */
    want: [number, number, number, number];
  }
  const OK = S.OK;
  const ROWS: Row[] = [
    { rpc: 'SubmitJob', mutates: true, req: () => ({ specJson: spec('m', 'team-a') }), want: [DENY, DENY, OK, OK] },
    { rpc: 'GetJob', req: () => ({ jobId: jobA }), want: [DENY, OK, OK, OK] },
    { rpc: 'WatchJob', stream: true, req: () => ({ jobId: jobA }), want: [DENY, OK, OK, OK] },
    { rpc: 'ExplainJob', req: () => ({ jobId: jobA }), want: [DENY, OK, OK, OK] },
    // Allowed, TaskLogs finds no log: the simulated executor writes none.
    { rpc: 'TaskLogs', stream: true, req: () => ({ jobId: jobA, task: 0 }), want: [DENY, PRE, PRE, PRE] },
    { rpc: 'CancelJob', mutates: true, req: () => ({ jobId: jobA }), want: [DENY, DENY, OK, OK] },
    { rpc: 'ListJobs', req: () => ({ namespace: 'team-a' }), want: [DENY, OK, OK, OK] },
    { rpc: 'GetCluster', req: () => ({}), want: [OK, OK, OK, OK] },
    { rpc: 'GetProfile', req: () => ({ name: 'spark-lr' }), want: [OK, OK, OK, OK] },
    { rpc: 'SetNodeScheduling', mutates: true, req: () => ({ server: 's0', action: 'uncordon' }), want: [DENY, DENY, DENY, OK] },
    { rpc: 'ListNamespaces', req: () => ({}), want: [OK, OK, OK, OK] },
    { rpc: 'PutNamespace', mutates: true, req: () => ({ name: 'team-c' }), want: [DENY, DENY, DENY, OK] },
    { rpc: 'DeleteNamespace', mutates: true, req: () => ({ name: 'team-c' }), want: [DENY, DENY, DENY, OK] },
    { rpc: 'AclBootstrap', mutates: true, req: () => ({}), want: [PRE, PRE, PRE, PRE] },
    { rpc: 'CreateToken', mutates: true, req: () => ({ name: 'made', policyJson: '{}' }), want: [DENY, DENY, DENY, OK] },
    { rpc: 'ListTokens', req: () => ({}), want: [DENY, DENY, DENY, OK] },
    { rpc: 'RevokeToken', mutates: true, req: () => ({ accessor: tokens.revoked!.split('.')[0] }), want: [DENY, DENY, DENY, OK] },
    { rpc: 'ListAudit', req: () => ({}), want: [DENY, DENY, DENY, OK] },
  ];
  const expected = (row: Row, who: Who): number => {
    if (UNAUTH.includes(who)) return row.rpc === 'AclBootstrap' ? PRE : AUTHN;
    return row.want[['other', 'reader', 'submitter', 'admin'].indexOf(who)]!;
  };

  it('every RPC in the service has a row', () => {
    const methods = Object.keys(loadProtos().proto.tarcil.v1.Scheduler.service);
    expect(new Set(ROWS.map((r) => r.rpc))).toEqual(new Set(methods));
  });

  /**
   * Until no job runs (the jobs earlier rows submitted) and the front-end's member record says it
   * has nothing to place: the cell writes nothing on its own then.
   */
  const quiet = async (): Promise<void> => {
    for (let i = 0; i < 200; i++) {
      const [jobs, owners, members] = await Promise.all([store.range(keys.jobs()), store.range(keys.owners()), store.range(keys.members())]);
      const settled = members.kvs.every((kv) => kv.value.includes('"placing":false'));
      if (settled && owners.kvs.length === 0 && jobs.kvs.every((kv) => /"state":"(succeeded|failed|cancelled)"/.test(kv.value))) return;
      await new Promise((r) => setTimeout(r, 50));
    }
    throw new Error('the cell did not settle');
  };

  it.each(ROWS)('$rpc: each caller gets the documented status; a refused call writes only its audit record', async (row) => {
    await quiet();
    for (const who of WHO) {
      const c = as(who === 'none' ? undefined : tokens[who]);
      const before = await snapshot();
      const r = row.stream ? await stream(c, row.rpc, row.req()) : await unary(c, row.rpc, row.req());
      expect({ who, code: r.code, details: r.details }).toMatchObject({ who, code: expected(row, who) });
      if (r.code !== AUTHN && r.code !== DENY) continue;
      const after = await snapshot();
      // The front-end's profile book writes `profiles/` on its own timer (the observations of the
      // jobs run above): not the call's writes.
      const changed = [...after].filter(([k, rev]) => before.get(k) !== rev && !k.startsWith(keys.profiles())).map(([k]) => k);
      const removed = [...before.keys()].filter((k) => !after.has(k));
      expect(removed).toEqual([]);
      expect(changed.filter((k) => !k.startsWith(keys.audits()))).toEqual([]);
      expect(changed).toHaveLength(row.mutates ? 1 : 0);
    }
  });

  it('ListJobs of all namespaces and ListNamespaces show only what the token may read', async () => {
    const jobs = async (t: string): Promise<string[]> =>
      (await ok<{ jobs: Array<{ id: string }> }>(as(t), 'ListJobs', { allNamespaces: true })).jobs.map((j) => j.id.split('/')[0]!);
    expect(new Set(await jobs(tokens.submitter!))).toEqual(new Set(['team-a']));
    expect(new Set(await jobs(tokens.other!))).toEqual(new Set(['team-b']));
    expect(new Set(await jobs(tokens.admin!))).toEqual(new Set(['team-a', 'team-b']));
    const nss = async (t: string): Promise<string[]> =>
      (await ok<{ namespaces: Array<{ name: string }> }>(as(t), 'ListNamespaces', {})).namespaces.map((n) => n.name);
    expect(await nss(tokens.reader!)).toEqual(['team-a']);
    expect(await nss(tokens.admin!)).toEqual(expect.arrayContaining(['default', 'team-a', 'team-b']));
  });

  it('no stored value holds a secret', async () => {
    const all = (await store.range(keys.prefix)).kvs;
    expect(secrets.length).toBeGreaterThanOrEqual(6);
    for (const s of secrets) {
      const raw = s.split('.')[1]!;
      expect(all.filter((kv) => kv.value.includes(raw))).toEqual([]);
    }
    // What is stored instead: the hash.
    const rec = JSON.parse((await store.get(keys.token(tokens.admin!.split('.')[0]!)))!.value) as { secretHash: string };
    expect(rec.secretHash).toMatch(/^[0-9a-f]{64}$/);
  });

  it('the audit trail says who did what and how it ended', async () => {
    const { records } = await ok<{ records: Array<Record<string, string>> }>(as(tokens.admin), 'ListAudit', {});
    const sub = tokens.submitter!.split('.')[0]!;
    expect(records).toContainEqual(
      expect.objectContaining({ rpc: 'SubmitJob', accessor: sub, who: `token:${sub} (submitter)`, namespace: 'team-a', target: jobA, result: 'ok' }),
    );
    expect(records).toContainEqual(
      expect.objectContaining({ rpc: 'SubmitJob', who: `token:${tokens.reader!.split('.')[0]} (reader)`, namespace: 'team-a', result: 'PERMISSION_DENIED' }),
    );
    expect(records).toContainEqual(expect.objectContaining({ rpc: 'CancelJob', who: 'unauthenticated', result: 'UNAUTHENTICATED', target: jobA }));
    expect(records).toContainEqual(
      expect.objectContaining({ rpc: 'SetNodeScheduling', who: `token:${tokens.admin!.split('.')[0]} (root)`, target: 's0 (uncordon)', result: 'ok' }),
    );
    expect(records).toContainEqual(expect.objectContaining({ rpc: 'AclBootstrap', result: 'FAILED_PRECONDITION' }));
    expect(records.every((r) => r.peer !== '')).toBe(true);
    // Reads are not audited.
    expect(records.filter((r) => r.rpc === 'GetJob' || r.rpc === 'ListJobs')).toEqual([]);
    // Filters: by namespace, and by time.
    const onlyB = await ok<{ records: Array<Record<string, string>> }>(as(tokens.admin), 'ListAudit', { namespace: 'team-b' });
    expect(onlyB.records.length).toBeGreaterThan(0);
    expect(onlyB.records.every((r) => r.namespace === 'team-b')).toBe(true);
    expect((await ok<{ records: unknown[] }>(as(tokens.admin), 'ListAudit', { sinceMs: Date.now() + 60_000 })).records).toEqual([]);
    expect((await ok<{ records: unknown[] }>(as(tokens.admin), 'ListAudit', { limit: 2 })).records).toHaveLength(2);
  });

  it("an accepted job's audit record is stored in the job's own transaction; a retry answered with that job writes its own", async () => {
    const sub = as(tokens.submitter);
    const ride = { specJson: spec('ride', 'team-a'), requestId: `ride-${Date.now()}` };
    const first = await ok<{ jobId: string }>(sub, 'SubmitJob', ride);
    const again = await ok<{ jobId: string }>(sub, 'SubmitJob', ride);
    expect(again.jobId).toBe(first.jobId);
    const job = await store.get(keys.job(first.jobId));
    const audits = (await store.range(keys.audits())).kvs.filter((kv) => kv.value.includes(`"target":"${first.jobId}"`));
    const recs = audits.map((kv) => ({ rev: kv.modRevision, rec: JSON.parse(kv.value) as Record<string, string> }));
    // Two calls, two records, both ok: the first at the job record's creation, the retry's later.
    expect(recs.map((r) => r.rec['rpc'])).toEqual(['SubmitJob', 'SubmitJob']);
    expect(recs.every((r) => r.rec['result'] === 'ok' && r.rec['namespace'] === 'team-a')).toBe(true);
    expect(recs.filter((r) => r.rev === job!.createRevision)).toHaveLength(1);
    expect(recs.filter((r) => r.rev > job!.createRevision)).toHaveLength(1);
    // A refused spec stores nothing but its audit record, written after the call.
    const before = (await store.range(keys.audits())).kvs.length;
    const bad = await unary(sub, 'SubmitJob', { specJson: spec('ride-bad', 'team-a').replace('"tasks":1', '"tasks":0') });
    expect(bad.code).toBe(S.INVALID_ARGUMENT);
    const after = (await store.range(keys.audits())).kvs;
    expect(after.length).toBe(before + 1);
    expect(JSON.parse(after.at(-1)!.value)).toMatchObject({ rpc: 'SubmitJob', result: 'INVALID_ARGUMENT' });
  });

  it("the CLI's --token reaches the front-end", async () => {
    const lines: string[] = [];
    const out = (l: string): void => {
      lines.push(l);
    };
    const flags = { server: addr, timeout: 5000 };
    await expect(jobsCommand({ ...flags, limit: 10 }, out)).rejects.toMatchObject({ code: 'UNAUTHENTICATED' });
    // tarcil jobs lists namespace default: the submitter of team-a may not read it.
    await expect(jobsCommand({ ...flags, token: tokens.submitter!, limit: 10 }, out)).rejects.toMatchObject({ code: 'PERMISSION_DENIED' });
    await expect(tokenListCommand({ ...flags, token: tokens.reader! }, out)).rejects.toMatchObject({ code: 'PERMISSION_DENIED' });
    lines.length = 0;
    await tokenCreateCommand({ ...flags, token: tokens.admin!, name: 'cli', policy: '{"namespaces":{"default":["read"]}}', ttl: 3_600_000 }, out);
    const secret = lines[1]!;
    expect(secret).toMatch(/^[0-9a-f]{16}\./);
    lines.length = 0;
    await tokenListCommand({ ...flags, token: tokens.admin! }, out);
    expect(lines.some((l) => l.startsWith(secret.split('.')[0]!) && l.includes('cli') && l.includes('"default":["read"]'))).toBe(true);
    expect(lines.join('\n')).not.toContain(secret.split('.')[1]);
    lines.length = 0;
    await jobsCommand({ ...flags, token: secret, limit: 10 }, out);
    await tokenRevokeCommand(secret.split('.')[0]!, { ...flags, token: tokens.admin! }, out);
    expect(lines.at(-1)).toContain('revoked');
    await expect(jobsCommand({ ...flags, token: secret, limit: 10 }, out)).rejects.toMatchObject({ code: 'UNAUTHENTICATED' });
    await expect(aclBootstrapCommand({ ...flags }, out)).rejects.toMatchObject({ code: 'FAILED_PRECONDITION' });
    lines.length = 0;
    await auditCommand({ ...flags, token: tokens.admin!, since: 60_000, output: 'json' }, out);
    const audit = JSON.parse(lines[0]!) as { records: Array<{ rpc: string; target: string }> };
    expect(audit.records).toContainEqual(expect.objectContaining({ rpc: 'RevokeToken', target: secret.split('.')[0] }));
  });
});

describe('policies', () => {
  it('are checked with errors that name the field and the rule', async () => {
    expect(parsePolicy('{"namespaces":{"team-a":["read"]}}')).toEqual({ namespaces: { 'team-a': ['read'] }, cluster: [] });
    const msg = (p: unknown): string => {
      try {
        parsePolicy(p);
      } catch (e) {
        return (e as TarcilError).message;
      }
      return 'accepted';
    };
    expect(msg('{"namespaces":{"team-a":["write"]}}')).toBe('policy.namespaces.team-a[0]: must be one of submit, read, cancel');
    expect(msg('{"cluster":["root"]}')).toBe('policy.cluster[0]: must be one of nodes, admin');
    expect(msg('{"namespaces":{"Team A":["read"]}}')).toMatch(/^policy\.namespaces\.Team A: must be a namespace name or '\*'/);
    expect(msg('{"namespace":{}}')).toMatch(/^policy: unknown field\(s\) namespace/);
    expect(msg('{nope')).toMatch(/^policy: must be valid JSON/);
    await expect(readPolicy('/nonexistent/policy.json')).rejects.toThrow(/--policy: must be inline JSON or a readable file/);
  });
});

describe('policies and namespace names that are members of Object.prototype', () => {
  const msg = (p: unknown): string => {
    try {
      parsePolicy(p);
    } catch (e) {
      return (e as TarcilError).message;
    }
    return 'accepted';
  };

  it("a policy naming namespace '__proto__' is refused, not read as no grant", () => {
    expect(msg('{"namespaces":{"__proto__":["read"]}}')).toBe("policy.namespaces: key '__proto__' is not allowed");
    expect(msg('{"namespaces":{"team-a":["read"],"__proto__":["submit"]}}')).toBe("policy.namespaces: key '__proto__' is not allowed");
  });

  it('a namespace a policy does not name grants nothing, whatever it is called', () => {
    const p = parsePolicy('{"namespaces":{"team-a":["read","submit"]}}');
    // As the auth layer reads policies back: tokens are JSON in the store.
    const stored = (JSON.parse(JSON.stringify({ policy: p })) as { policy: typeof p }).policy;
    for (const pol of [p, stored]) {
      for (const ns of ['constructor', 'toString', '__proto__', 'hasOwnProperty', 'valueOf']) {
        for (const verb of NAMESPACE_VERBS) expect(allows(pol, verb, ns)).toBe(false);
      }
      expect(allows(pol, 'read', 'team-a')).toBe(true);
      expect(allows(pol, 'cancel', 'team-a')).toBe(false);
    }
  });

  it("a policy may grant namespace 'constructor' (a valid namespace name), and only it", () => {
    const p = parsePolicy('{"namespaces":{"constructor":["read"]}}');
    expect(allows(p, 'read', 'constructor')).toBe(true);
    expect(allows(p, 'submit', 'constructor')).toBe(false);
    expect(allows(p, 'read', 'toString')).toBe(false);
    expect(allowsAny(p, 'read')).toBe(true);
    expect(allowsAny(p, 'submit')).toBe(false);
  });
});

describe('ACLs off, client certificates, audit retention (embedded store)', () => {
  let pki: TestPki;
  beforeAll(() => {
    pki = makePki();
  });
  afterAll(() => pki?.remove());

  const start = async (store: ClusterStore, keys: Keys, extra: Partial<Parameters<typeof startScheduler>[0]>): Promise<SchedulerProcess> =>
    startTestScheduler({ name: 'acl-mem', store, keys, clock, log, agents: 1, seed: 7 }, { housekeeping: false, ...extra });

  it('with ACLs off every call is allowed without a token and audited as anonymous', async () => {
    const store = new MemoryStore();
    const keys = new Keys('/off/');
    const sched = await start(store, keys, {});
    const c = schedulerClient(`127.0.0.1:${sched.port}`);
    try {
      expect((await unary(c, 'PutNamespace', { name: 'team-a' })).code).toBe(S.OK);
      expect((await unary(c, 'ListTokens', {})).code).toBe(S.OK);
      const { records } = await ok<{ records: Array<Record<string, string>> }>(c, 'ListAudit', {});
      expect(records).toEqual([expect.objectContaining({ rpc: 'PutNamespace', who: 'anonymous', target: 'team-a', result: 'ok' })]);
    } finally {
      c.close();
      await sched.close();
      await store.close();
    }
  });

  it('a verified client certificate a token names gets that token’s policy', async () => {
    const store = new MemoryStore();
    const keys = new Keys('/cert/');
    const sched = await start(store, keys, { acl: true, tls: { certFile: pki.serverCert, keyFile: pki.serverKey, caFile: pki.ca } });
    const tls = { caFile: pki.ca, certFile: pki.clientCert, keyFile: pki.clientKey };
    const addr = `127.0.0.1:${sched.port}`;
    const cs: SchedulerClient[] = [];
    const mk = (token?: string): SchedulerClient => {
      const c = schedulerClient(addr, tls, token);
      cs.push(c);
      return c;
    };
    try {
      expect((await unary(mk(), 'ListJobs', {})).code).toBe(S.UNAUTHENTICATED);
      const admin = (await ok<{ secret: string }>(mk(), 'AclBootstrap', {})).secret;
      await ok(mk(admin), 'CreateToken', { name: 'ci', policyJson: '{"namespaces":{"default":["read"]}}', certCommonName: 'client' });
      expect((await unary(mk(), 'ListJobs', {})).code).toBe(S.OK);
      expect((await unary(mk(), 'SubmitJob', { specJson: spec('x', 'default') })).code).toBe(S.PERMISSION_DENIED);
      const { records } = await ok<{ records: Array<Record<string, string>> }>(mk(admin), 'ListAudit', {});
      expect(records.at(-1)).toMatchObject({ rpc: 'SubmitJob', who: 'cert:client', result: 'PERMISSION_DENIED' });
      // The command line presents the certificate with --tls-cert/--tls-key, and needs no token.
      const lines: string[] = [];
      await jobsCommand({ server: addr, timeout: 5000, limit: 5, tlsCa: pki.ca, tlsCert: pki.clientCert, tlsKey: pki.clientKey }, (l) => lines.push(l));
      expect(lines.join('\n')).toContain('no jobs');
      const bare = await jobsCommand({ server: addr, timeout: 5000, limit: 5, tlsCa: pki.ca }, () => undefined).catch((e: unknown) => e);
      expect(bare).toBeInstanceOf(TarcilError);
      expect((bare as TarcilError).code).toMatch(/UNAUTHENTICATED|UNAVAILABLE/);
      const half = await jobsCommand({ server: addr, timeout: 5000, limit: 5, tlsCa: pki.ca, tlsCert: pki.clientCert }, () => undefined).catch(
        (e: unknown) => e,
      );
      expect((half as TarcilError).message).toBe('--tls-key: is needed with --tls-cert (a client certificate goes with its key)');
    } finally {
      for (const c of cs) c.close();
      await sched.close();
      await store.close();
    }
  });

  it('the retention sweep deletes audit records older than --retain and keeps the others', async () => {
    const store = new MemoryStore();
    const keys = new Keys('/ret/');
    const now = Date.now();
    await store.put(keys.audit(now - 120_000, 'old1'), '{}');
    await store.put(keys.audit(now - 61_000, 'old2'), '{}');
    await store.put(keys.audit(now - 1_000, 'new1'), '{}');
    const sweeper = new RetentionSweeper({ store, keys, clock, log, retainMs: 60_000 });
    await sweeper.start();
    try {
      expect((await sweeper.sweep()).audits).toBe(2);
      expect((await store.range(keys.audits())).kvs.map((kv) => kv.key)).toEqual([keys.audit(now - 1_000, 'new1')]);
    } finally {
      await sweeper.stop();
      await store.close();
    }
  });
});
