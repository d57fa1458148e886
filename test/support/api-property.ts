/**
 * A property-based test of the Scheduler gRPC API, shared by test/frontend/api-property.test.ts
 * (a small budget in `npm test`) and bench/api-fuzz.ts (the same property for minutes).
 *
 * One fast-check run is a scenario: a few random calls against a running front-end of the demo
 * cell (10 servers, 24 RUs, 2 racks) on the embedded MemoryStore or on etcd. Job specs are sent
 * as spec_json, valid and invalid, small and at every documented limit; the other calls use
 * existing and unknown job ids. Each answer is checked as it arrives; at the end of the scenario
 * the jobs it submitted are checked, cancelled if they are not final, and the cell must be back
 * to idle. The checks are named (PROPERTIES) so a report says which rule broke.
 *
 * The expected status of a submit comes from an oracle written from the spec rules
 * (src/model/schema.ts) and the cell: INVALID_ARGUMENT for a spec that breaks a rule (naming the
 * field), FAILED_PRECONDITION for a valid spec no server set of the cell can ever take, OK
 * otherwise, ALREADY_EXISTS for a request id reused with another spec. RESOURCE_EXHAUSTED
 * (back-pressure, `--max-pending-tasks`) is accepted for a new valid job only when the jobs the
 * scenario has open could hold that many tasks not yet placed, and its message must say so.
 */
import * as grpc from '@grpc/grpc-js';
import fc from 'fast-check';
import { service as healthService } from 'grpc-health-check';
import { randomBytes, randomUUID } from 'node:crypto';
import { schedulerClient } from '../../src/cli/grpc-clients.ts';
import type { Cluster__Output } from '../../src/rpc/gen/tarcil/v1/Cluster.ts';
import type { Explanation__Output } from '../../src/rpc/gen/tarcil/v1/Explanation.ts';
import type { JobEvent__Output } from '../../src/rpc/gen/tarcil/v1/JobEvent.ts';
import type { Job__Output } from '../../src/rpc/gen/tarcil/v1/Job.ts';
import type { ListJobsResponse__Output } from '../../src/rpc/gen/tarcil/v1/ListJobsResponse.ts';
import type { SchedulerClient } from '../../src/rpc/gen/tarcil/v1/Scheduler.ts';
import type { SubmitJobResponse__Output } from '../../src/rpc/gen/tarcil/v1/SubmitJobResponse.ts';
import { DEFAULT_MAX_PENDING_TASKS } from '../../src/owner/context.ts';
import { startScheduler, type SchedulerProcess } from '../../src/frontend/runtime.ts';
import { startMonitor, type MonitorProcess } from '../../src/node/runtime.ts';
import { expandCluster, loadCatalog, parseJobSpec, resolveCluster } from '../../src/model/catalog.ts';
import { slowdown as perfSlowdown } from '../../src/model/perf.ts';
import { MAX_DURATION_MS, MAX_PRIORITY, MAX_QUEUE_MS, MAX_TASKS } from '../../src/model/schema.ts';
import { N_RESOURCES, type ServerSpec } from '../../src/model/types.ts';
import { EtcdStore } from '../../src/store/etcd.ts';
import { Keys } from '../../src/state/keys.ts';
import { MemoryStore } from '../../src/store/memory.ts';
import type { ClusterStore } from '../../src/store/types.ts';
import { SystemClock } from '../../src/util/clock.ts';
import { createLogger } from '../../src/util/log.ts';
import { SeededRng } from '../../src/util/rng.ts';

// ---------------------------------------------------------------------------------------------
// The cell

const catalog = loadCatalog();
export const DEMO_SERVERS: readonly ServerSpec[] = expandCluster(resolveCluster('demo', catalog), catalog.platforms);
const CELL_RUS = DEMO_SERVERS.reduce((n, s) => n + s.rus, 0);
const CELL_PLATFORMS = [...new Set(DEMO_SERVERS.map((s) => s.platform))];
/** Known to the catalog (so the spec is valid) but not in the demo cell. */
const OTHER_PLATFORMS = [...catalog.platforms.keys()].filter((p) => !CELL_PLATFORMS.includes(p));
const WORKLOADS = [...catalog.workloads.keys()];
const FINAL = new Set(['succeeded', 'failed', 'cancelled']);
const WAITING = new Set(['queued', 'admitted']);
const JOB_STATES = ['queued', 'admitted', 'placed', 'running', 'succeeded', 'failed', 'cancelled'];
const OPEN_STATES = ['queued', 'admitted', 'placed', 'running'];
const MAX_SPEC_BYTES = 64 * 1024;
/** The front-end's gRPC receive limit (src/rpc/grpc.ts MAX_REQUEST_BYTES). */
const MAX_GRPC_REQUEST = 1 << 20;
/** The test cell's back-pressure limit (the front-end's default, passed explicitly). */
const MAX_PENDING_TASKS = DEFAULT_MAX_PENDING_TASKS;
/** How long after a job's final event the front-end's cached count of unplaced tasks may still include it. */
const PENDING_CACHE_GRACE_MS = 1000;

export type StoreKind = 'memory' | 'etcd';

export interface ApiCell {
  kind: StoreKind;
  prefix: string;
  keys: Keys;
  /** A store client for audits (the one the front-end uses, or a second etcd connection). */
  audit: ClusterStore;
  client: SchedulerClient;
  address: string;
  close(): Promise<void>;
}

export interface CellOptions {
  kind: StoreKind;
  /** etcd only: http://host:port. */
  etcdEndpoint?: string;
  leaseTtlSeconds?: number;
  logLevel?: string;
}

/** A front-end with 2 agents and one monitor per demo server (simulated executor), under a fresh prefix. */
export async function startApiCell(o: CellOptions): Promise<ApiCell> {
  const prefix = `/tarcil-test/api-property/${o.kind}/${randomUUID()}/`;
  const keys = new Keys(prefix);
  const clock = new SystemClock();
  const log = createLogger('api-property', o.logLevel);
  const ttl = o.leaseTtlSeconds ?? 3;
  const stores: ClusterStore[] = [];
  const open = async (): Promise<ClusterStore> => {
    if (o.kind === 'memory') {
      const s = stores[0] ?? new MemoryStore();
      if (stores.length === 0) stores.push(s);
      return s;
    }
    if (!o.etcdEndpoint) throw new Error('startApiCell: etcdEndpoint is required for etcd');
    const s = await EtcdStore.connect({ endpoints: [o.etcdEndpoint] });
    stores.push(s);
    return s;
  };
  const nodeStore = await open();
  const schedStore = await open();
  const audit = await open();
  const monitors: MonitorProcess[] = await Promise.all(
    DEMO_SERVERS.map((s) =>
      startMonitor({ store: nodeStore, keys, clock, log, server: s, executor: 'simulated', host: '127.0.0.1', port: 0, leaseTtlSeconds: ttl }),
    ),
  );
  let sched: SchedulerProcess | undefined;
  try {
    sched = await startScheduler({
      name: `api-${o.kind}`,
      store: schedStore,
      keys,
      catalog,
      clock,
      rng: new SeededRng(17),
      log,
      agents: 2,
      host: '127.0.0.1',
      port: 0,
      leaseTtlSeconds: ttl,
      maxPendingTasks: MAX_PENDING_TASKS,
    });
  } catch (err) {
    await Promise.all(monitors.map((m) => m.close()));
    await Promise.all(stores.map((s) => s.close()));
    throw err;
  }
  const address = `127.0.0.1:${sched.port}`;
  const client = schedulerClient(address);
  const running = sched;
  return {
    kind: o.kind,
    prefix,
    keys,
    audit,
    client,
    address,
    close: async () => {
      client.close();
      await running.close();
      await Promise.all(monitors.map((m) => m.close()));
      await Promise.all(stores.map((s) => s.close()));
    },
  };
}

// ---------------------------------------------------------------------------------------------
// Generated values: job specs, calls, scenarios

/** Stands for a long string (or array) in generated values, expanded when the request is built. */
export interface Big {
  $repeat: string;
  n: number;
  array?: boolean;
}
const big = (s: string, n: number, array = false): Big => (array ? { $repeat: s, n, array } : { $repeat: s, n });
function isBig(v: unknown): v is Big {
  return typeof v === 'object' && v !== null && '$repeat' in v && 'n' in v;
}
function expand(_key: string, v: unknown): unknown {
  if (!isBig(v)) return v;
  return v.array ? Array.from({ length: v.n }, () => v.$repeat) : v.$repeat.repeat(v.n);
}

/** One top-level field replaced (or removed) in an otherwise valid spec, and the field the answer must name. */
export interface Mutation {
  key: string;
  value?: unknown;
  remove?: true;
  fields: string[];
}

export type RawKind = 'not-json' | 'array' | 'null' | 'string' | 'number' | 'empty' | 'nested' | 'proto-key' | 'constructor-key' | 'pad';

export type SpecCase =
  | { kind: 'valid'; spec: Record<string, unknown> }
  | { kind: 'invalid'; spec: Record<string, unknown>; mutation: Mutation }
  | { kind: 'raw'; raw: RawKind; n: number };

export type RidMode = { kind: 'none' } | { kind: 'fresh'; long: boolean } | { kind: 'bad'; id: string };

export type Target = { kind: 'job'; pick: number } | { kind: 'unknown'; id: string } | { kind: 'malformed'; id: string };

export type Cmd =
  | { op: 'submit'; spec: SpecCase; rid: RidMode }
  | { op: 'retry'; pick: number; variant: 'same' | 'renamed' | 'other'; other: SpecCase }
  | { op: 'get' | 'cancel' | 'explain' | 'watch'; target: Target }
  | { op: 'list'; states: string[]; limit: number }
  | { op: 'cluster' }
  | { op: 'pause'; ms: number };

const nameArb = fc.oneof({ weight: 10, arbitrary: fc.stringMatching(/^[A-Za-z0-9._-]{1,16}$/) }, { weight: 1, arbitrary: fc.constant('n'.repeat(128)) });

const inlineProfileArb = fc.record(
  {
    caused: fc.array(fc.integer({ min: 0, max: 99 }), { minLength: N_RESOURCES, maxLength: N_RESOURCES }),
    name: fc.stringMatching(/^[a-z][a-z0-9-]{0,10}$/),
    family: fc.constantFrom('batch', 'web', 'x'),
    description: fc.string({ maxLength: 20 }),
    latencyCritical: fc.boolean(),
    typicalDurationMs: fc.oneof(fc.constant(MAX_DURATION_MS), fc.integer({ min: 1, max: 10_000 })),
    platformPerf: fc.dictionary(
      fc.constantFrom(...CELL_PLATFORMS, ...OTHER_PLATFORMS.slice(0, 2)),
      fc.oneof(fc.constantFrom(100, 0.01), fc.integer({ min: 1, max: 100 })),
      { maxKeys: 3 },
    ),
  },
  { requiredKeys: ['caused'] },
);

const tasksArb = fc.oneof(
  { weight: 14, arbitrary: fc.integer({ min: 1, max: 8 }) },
  { weight: 4, arbitrary: fc.constantFrom(2, 3, 5, 8, 9, 10, 11, 24, 25) },
  { weight: 3, arbitrary: fc.integer({ min: 9, max: 40 }) },
  { weight: 1, arbitrary: fc.constant(MAX_TASKS) },
  { weight: 1, arbitrary: fc.integer({ min: 41, max: MAX_TASKS }) },
);

const durationArb = fc.oneof(
  { weight: 14, arbitrary: fc.integer({ min: 5, max: 200 }) },
  { weight: 1, arbitrary: fc.constantFrom(MAX_DURATION_MS, 60_000, 0.5, 1) },
);

const commandArb = fc.record(
  {
    argv: fc.oneof(
      { weight: 8, arbitrary: fc.constant(['true']) },
      { weight: 8, arbitrary: fc.array(fc.string({ maxLength: 10 }), { maxLength: 3 }).map((a) => ['echo', ...a]) },
      // Near the 64 KiB spec limit, and over it (one argument may be 65,536 characters; the spec may not).
      { weight: 1, arbitrary: fc.constantFrom(['echo', big('y', 60_000)], ['echo', big('y', 65_536)], ['echo', big('y', 30_000)]) },
    ),
    env: fc.dictionary(fc.stringMatching(/^[A-Za-z_][A-Za-z0-9_]{0,8}$/), fc.string({ maxLength: 10 }), { maxKeys: 3 }),
  },
  { requiredKeys: ['argv'] },
);

const constraintsArb = fc.record(
  {
    platforms: fc.oneof(
      { weight: 4, arbitrary: fc.subarray(CELL_PLATFORMS, { minLength: 1 }) },
      // Each of these three matches exactly 8 RUs of the demo cell.
      { weight: 3, arbitrary: fc.constantFrom(['c3-large'], ['m3-large'], ['r3-xlarge']) },
      { weight: 1, arbitrary: fc.constant(OTHER_PLATFORMS.slice(0, 1)) },
    ),
    attributes: fc.oneof(
      { weight: 6, arbitrary: fc.constantFrom<Record<string, unknown>>({ zone: 'demo-a' }, { ssd: 'true' }, { zone: 'demo-a', ssd: 'true' }, {}) },
      // Attributes no server has.
      { weight: 2, arbitrary: fc.constantFrom<Record<string, unknown>>({ zone: 'nowhere' }, { ssd: 'false' }, { gpu: 'yes' }, { zone: big('z', 256) }) },
    ),
    dataServers: fc.oneof(
      { weight: 15, arbitrary: fc.subarray([...DEMO_SERVERS.map((s) => s.id), 'no-such-server'], { maxLength: 3 }) },
      { weight: 1, arbitrary: fc.constant(big('s0000', 5000, true)) },
    ),
  },
  { requiredKeys: [] },
);

const validSpecArb: fc.Arbitrary<Record<string, unknown>> = fc
  .tuple(
    fc.record(
      {
        name: nameArb,
        profile: fc.oneof({ weight: 4, arbitrary: fc.constantFrom(...WORKLOADS) }, { weight: 1, arbitrary: inlineProfileArb }),
        tasks: tasksArb,
        priority: fc.oneof(fc.constantFrom(0, MAX_PRIORITY), fc.integer({ min: 0, max: MAX_PRIORITY })),
        mode: fc.constantFrom('incremental', 'gang'),
        locality: fc.record(
          { mode: fc.constantFrom('any', 'pack', 'spread'), scope: fc.constantFrom('server', 'rack'), required: fc.boolean() },
          { requiredKeys: [] },
        ),
        constraints: fc.oneof({ weight: 2, arbitrary: constraintsArb }, { weight: 1, arbitrary: fc.constant({}) }),
        maxQueueMs: fc.oneof(fc.constantFrom(0, MAX_QUEUE_MS), fc.integer({ min: 0, max: 30_000 })),
        durationMs: durationArb,
      },
      { requiredKeys: ['name', 'profile', 'tasks', 'durationMs'] },
    ),
    fc.option(commandArb, { freq: 8 }),
    fc.boolean(),
  )
  .map(([spec, command, keepDuration]) => {
    if (command === null) return spec;
    const out: Record<string, unknown> = { ...spec, command };
    if (!keepDuration) delete out.durationMs;
    return out;
  });

const caused = (v: number, at = -1, bad: unknown = 100): unknown[] => Array.from({ length: N_RESOURCES }, (_, i) => (i === at ? bad : v));

/** Hostile or wrong values, one field at a time, with the field the INVALID_ARGUMENT must name. */
export const MUTATIONS: readonly Mutation[] = [
  { key: 'name', value: '', fields: ['name'] },
  { key: 'name', value: 'a/../../servers/x', fields: ['name'] },
  { key: 'name', value: 'n'.repeat(129), fields: ['name'] },
  { key: 'name', value: 42, fields: ['name'] },
  { key: 'name', remove: true, fields: ['name'] },
  { key: 'profile', value: 'no-such-profile', fields: ['profile'] },
  { key: 'profile', value: '../../etc/passwd', fields: ['profile'] },
  { key: 'profile', value: 42, fields: ['profile'] },
  { key: 'profile', value: { caused: [1, 2, 3] }, fields: ['profile.caused'] },
  { key: 'profile', value: { caused: caused(10, 9, 100) }, fields: ['profile.caused[9]'] },
  { key: 'profile', value: { caused: caused(10, 0, -1) }, fields: ['profile.caused[0]'] },
  { key: 'profile', value: { caused: caused(10, 3, 'NaN') }, fields: ['profile.caused[3]'] },
  { key: 'profile', value: { caused: caused(10), rootAccess: true }, fields: ['profile.rootAccess'] },
  { key: 'profile', value: { caused: caused(10), platformPerf: { 'cray-1': 1 } }, fields: ['profile.platformPerf'] },
  { key: 'profile', remove: true, fields: ['profile'] },
  { key: 'tasks', value: 0, fields: ['tasks'] },
  { key: 'tasks', value: -1, fields: ['tasks'] },
  { key: 'tasks', value: MAX_TASKS + 1, fields: ['tasks'] },
  { key: 'tasks', value: 2.5, fields: ['tasks'] },
  { key: 'tasks', value: '4', fields: ['tasks'] },
  { key: 'tasks', value: 'NaN', fields: ['tasks'] },
  { key: 'tasks', value: 'Infinity', fields: ['tasks'] },
  { key: 'tasks', value: null, fields: ['tasks'] },
  { key: 'tasks', value: 1e300, fields: ['tasks'] },
  { key: 'tasks', value: true, fields: ['tasks'] },
  { key: 'tasks', value: [1], fields: ['tasks'] },
  { key: 'tasks', remove: true, fields: ['tasks'] },
  { key: 'priority', value: -1, fields: ['priority'] },
  { key: 'priority', value: MAX_PRIORITY + 1, fields: ['priority'] },
  { key: 'priority', value: 0.5, fields: ['priority'] },
  { key: 'priority', value: 'high', fields: ['priority'] },
  { key: 'priority', value: null, fields: ['priority'] },
  { key: 'mode', value: 'yolo', fields: ['mode'] },
  { key: 'mode', value: 'GANG', fields: ['mode'] },
  { key: 'mode', value: 1, fields: ['mode'] },
  { key: 'locality', value: 'spread', fields: ['locality'] },
  { key: 'locality', value: { mode: 'everywhere' }, fields: ['locality.mode'] },
  { key: 'locality', value: { mode: 'spread', scope: 'zone' }, fields: ['locality.scope'] },
  { key: 'locality', value: { mode: 'spread', required: 'yes' }, fields: ['locality.required'] },
  { key: 'locality', value: { mode: 'pack', bogus: 1 }, fields: ['locality.bogus'] },
  { key: 'constraints', value: { platforms: [] }, fields: ['constraints.platforms'] },
  { key: 'constraints', value: { platforms: ['cray-1'] }, fields: ['constraints.platforms[0]'] },
  { key: 'constraints', value: { platforms: 'm3-large' }, fields: ['constraints.platforms'] },
  { key: 'constraints', value: { attributes: { zone: 5 } }, fields: ['constraints.attributes'] },
  { key: 'constraints', value: { attributes: { 'bad key!': 'x' } }, fields: ['constraints.attributes'] },
  { key: 'constraints', value: { attributes: { zone: 'z'.repeat(257) } }, fields: ['constraints.attributes'] },
  { key: 'constraints', value: { dataServers: [''] }, fields: ['constraints.dataServers[0]'] },
  { key: 'constraints', value: { dataServers: Array.from({ length: 10_001 }, () => 'a') }, fields: ['constraints.dataServers'] },
  { key: 'constraints', value: { bogus: true }, fields: ['constraints.bogus'] },
  { key: 'maxQueueMs', value: -1, fields: ['maxQueueMs'] },
  { key: 'maxQueueMs', value: MAX_QUEUE_MS + 1, fields: ['maxQueueMs'] },
  { key: 'maxQueueMs', value: 1.5, fields: ['maxQueueMs'] },
  { key: 'maxQueueMs', value: 'soon', fields: ['maxQueueMs'] },
  { key: 'maxQueueMs', value: 'NaN', fields: ['maxQueueMs'] },
  { key: 'durationMs', value: 0, fields: ['durationMs'] },
  { key: 'durationMs', value: -5, fields: ['durationMs'] },
  { key: 'durationMs', value: MAX_DURATION_MS + 1, fields: ['durationMs'] },
  { key: 'durationMs', value: 'fast', fields: ['durationMs'] },
  { key: 'durationMs', value: '-Infinity', fields: ['durationMs'] },
  { key: 'durationMs', value: null, fields: ['durationMs'] },
  { key: 'durationMs', remove: true, fields: ['durationMs'] },
  { key: 'command', value: { argv: [] }, fields: ['command.argv'] },
  { key: 'command', value: { argv: [''] }, fields: ['command.argv'] },
  { key: 'command', value: { argv: ['sh', 'a\u0000b'] }, fields: ['command.argv[1]'] },
  { key: 'command', value: { argv: 'true' }, fields: ['command.argv'] },
  { key: 'command', value: { argv: [1] }, fields: ['command.argv[0]'] },
  { key: 'command', value: { argv: ['true'], env: { 'A=B': 'x' } }, fields: ['command.env'] },
  { key: 'command', value: { argv: ['true'], env: { A: 1 } }, fields: ['command.env.A'] },
  { key: 'rootAccess', value: true, fields: ['rootAccess'] },
  { key: 'durationms', value: 5, fields: ['durationms'] },
  { key: 'pad', value: big('x', 2000), fields: ['pad'] },
];

const rawArb: fc.Arbitrary<SpecCase> = fc.oneof(
  {
    weight: 4,
    arbitrary: fc
      .constantFrom<RawKind>('not-json', 'array', 'null', 'string', 'number', 'empty', 'proto-key', 'constructor-key')
      .map((raw) => ({ kind: 'raw' as const, raw, n: 0 })),
  },
  { weight: 1, arbitrary: fc.constantFrom(10_000, 30_000).map((n) => ({ kind: 'raw' as const, raw: 'nested' as const, n })) },
  // Over the 64 KiB spec limit; the last one over the 1 MiB gRPC message limit as well.
  { weight: 1, arbitrary: fc.constantFrom(70_000, 200_000, 1_100_000).map((n) => ({ kind: 'raw' as const, raw: 'pad' as const, n })) },
);

export const specCaseArb: fc.Arbitrary<SpecCase> = fc.oneof(
  { weight: 7, arbitrary: validSpecArb.map((spec) => ({ kind: 'valid' as const, spec })) },
  { weight: 3, arbitrary: fc.tuple(validSpecArb, fc.constantFrom(...MUTATIONS)).map(([spec, mutation]) => ({ kind: 'invalid' as const, spec, mutation })) },
  { weight: 1, arbitrary: rawArb },
);

const ridArb: fc.Arbitrary<RidMode> = fc.oneof(
  { weight: 6, arbitrary: fc.constant({ kind: 'none' as const }) },
  { weight: 4, arbitrary: fc.boolean().map((long) => ({ kind: 'fresh' as const, long })) },
  { weight: 1, arbitrary: fc.constantFrom('has space', 'x'.repeat(129), 'a/b', 'ü', 'tab\t').map((id) => ({ kind: 'bad' as const, id })) },
);

const targetArb: fc.Arbitrary<Target> = fc.oneof(
  { weight: 5, arbitrary: fc.nat(20).map((pick) => ({ kind: 'job' as const, pick })) },
  {
    weight: 3,
    arbitrary: fc
      .oneof(fc.stringMatching(/^[A-Za-z0-9._-]{1,40}$/), fc.constant('j-nope'), fc.constant('j'.repeat(200)))
      .map((id) => ({ kind: 'unknown' as const, id: `zz-${id}`.slice(0, 200) })),
  },
  { weight: 1, arbitrary: fc.constantFrom('', 'a/b', '../jobs/x', 'x'.repeat(201), 'j-\u0000', 'ü').map((id) => ({ kind: 'malformed' as const, id })) },
);

const listArb = fc
  .tuple(fc.subarray(JOB_STATES), fc.option(fc.constantFrom('QUEUED', 'done', '', ' queued', 'pending', 'x'.repeat(300)), { freq: 2 }), fc.nat(5))
  .map(([states, bad, limit]) => ({ op: 'list' as const, states: bad === null ? states : [...states, bad], limit }));

export const cmdArb: fc.Arbitrary<Cmd> = fc.oneof(
  { weight: 14, arbitrary: fc.record({ op: fc.constant('submit' as const), spec: specCaseArb, rid: ridArb }) },
  {
    weight: 2,
    arbitrary: fc.record({
      op: fc.constant('retry' as const),
      pick: fc.nat(10),
      variant: fc.constantFrom('same' as const, 'renamed' as const, 'other' as const),
      other: specCaseArb,
    }),
  },
  { weight: 5, arbitrary: fc.record({ op: fc.constantFrom('get' as const, 'cancel' as const, 'explain' as const, 'watch' as const), target: targetArb }) },
  { weight: 2, arbitrary: listArb },
  { weight: 1, arbitrary: fc.constant({ op: 'cluster' as const }) },
  { weight: 2, arbitrary: fc.integer({ min: 0, max: 300 }).map((ms) => ({ op: 'pause' as const, ms })) },
);

export const scenarioArb: fc.Arbitrary<Cmd[]> = fc.array(cmdArb, { minLength: 1, maxLength: 8 });

/** Scenarios run first in every check: the documented limits, and a gang that fills the idle cell. */
export const EXAMPLE_SCENARIOS: Cmd[][] = [
  [
    {
      op: 'submit',
      spec: { kind: 'valid', spec: { name: 'fills-the-cell', profile: 'spark-lr', tasks: CELL_RUS, mode: 'gang', durationMs: 50 } },
      rid: { kind: 'none' },
    },
    {
      op: 'submit',
      spec: {
        kind: 'valid',
        spec: { name: 'spread-too-wide', profile: 'spark-lr', tasks: DEMO_SERVERS.length + 1, locality: { mode: 'spread' }, durationMs: 50 },
      },
      rid: { kind: 'none' },
    },
    { op: 'watch', target: { kind: 'unknown', id: 'j-does-not-exist' } },
    { op: 'list', states: ['queued', 'finished'], limit: 0 },
  ],
  [
    {
      op: 'submit',
      spec: { kind: 'valid', spec: { name: 'n'.repeat(128), profile: 'hadoop-map', tasks: MAX_TASKS, priority: 0, maxQueueMs: 0, durationMs: 5 } },
      rid: { kind: 'fresh', long: true },
    },
    {
      op: 'submit',
      spec: {
        kind: 'valid',
        spec: {
          name: 'top',
          profile: 'memcached',
          tasks: 8,
          mode: 'gang',
          priority: MAX_PRIORITY,
          maxQueueMs: MAX_QUEUE_MS,
          durationMs: 200,
          constraints: { platforms: ['c3-large'], attributes: { zone: 'demo-a' } },
        },
      },
      rid: { kind: 'none' },
    },
    {
      op: 'submit',
      spec: { kind: 'valid', spec: { name: 'nowhere', profile: 'spark-lr', tasks: 1, durationMs: 5, constraints: { attributes: { zone: 'nowhere' } } } },
      rid: { kind: 'none' },
    },
    {
      op: 'submit',
      spec: {
        kind: 'invalid',
        spec: { name: 'over', profile: 'spark-lr', tasks: 1, durationMs: 5 },
        mutation: { key: 'tasks', value: MAX_TASKS + 1, fields: ['tasks'] },
      },
      rid: { kind: 'none' },
    },
    { op: 'retry', pick: 0, variant: 'renamed', other: { kind: 'raw', raw: 'empty', n: 0 } },
    { op: 'cancel', target: { kind: 'job', pick: 1 } },
  ],
];

// ---------------------------------------------------------------------------------------------
// The oracle

/** What the answer to a submit may be. */
export interface Expectation {
  codes: grpc.status[];
  /** INVALID_ARGUMENT: the details name one of these fields ('(root)' accepts any). */
  fields: string[];
  /** A valid spec, as parsed from the text sent (undefined when the text is not a valid spec). */
  spec?: Record<string, unknown>;
  feasible?: boolean;
  why: string;
}

interface Built {
  text: string;
  bytes: number;
  exp: Expectation;
}

function specText(spec: Record<string, unknown>): string {
  return JSON.stringify(spec, expand);
}

function rawText(raw: RawKind, n: number): string {
  const base = '"name":"raw","profile":"spark-lr","tasks":1,"durationMs":5';
  switch (raw) {
    case 'not-json':
      return '{name:';
    case 'array':
      return '[]';
    case 'null':
      return 'null';
    case 'string':
      return '"spark-lr"';
    case 'number':
      return '42';
    case 'empty':
      return '';
    case 'nested':
      return `${'['.repeat(n)}${']'.repeat(n)}`;
    case 'proto-key':
      return `{"__proto__":{"tasks":5},${base}}`;
    case 'constructor-key':
      return `{"constructor":{"prototype":{"x":1}},${base}}`;
    case 'pad':
      return `{${base},"pad":"${'x'.repeat(n)}"}`;
  }
}

const RAW_FIELDS: Record<RawKind, string[]> = {
  'not-json': ['spec_json'],
  array: ['(root)'],
  null: ['(root)'],
  string: ['(root)'],
  number: ['(root)'],
  empty: ['spec'],
  nested: ['spec_json', '(root)'],
  'proto-key': ['__proto__'],
  'constructor-key': ['constructor'],
  pad: ['spec_json'],
};

interface Eligible {
  servers: number;
  rus: number;
  racks: number;
  /** The most eligible RUs on one server, and in one rack (a required pack needs its tasks in one). */
  serverRus: number;
  rackRus: number;
}

/** The demo servers the spec's constraints allow. */
function eligibleServers(spec: Record<string, unknown>): ServerSpec[] {
  const c = (spec.constraints ?? {}) as { platforms?: string[]; attributes?: Record<string, string> };
  return DEMO_SERVERS.filter(
    (s) => (!c.platforms || c.platforms.includes(s.platform)) && Object.entries(c.attributes ?? {}).every(([k, v]) => s.attributes[k] === v),
  );
}

function eligible(spec: Record<string, unknown>): Eligible {
  const match = eligibleServers(spec);
  const perRack = new Map<string, number>();
  for (const s of match) perRack.set(s.rack, (perRack.get(s.rack) ?? 0) + s.rus);
  return {
    servers: match.length,
    rus: match.reduce((n, s) => n + s.rus, 0),
    racks: perRack.size,
    serverRus: Math.max(0, ...match.map((s) => s.rus)),
    rackRus: Math.max(0, ...perRack.values()),
  };
}

interface Shape {
  tasks: number;
  gang: boolean;
  spread: boolean;
  /** locality pack with required true: every task on one server (or rack), a gang only. */
  pack: boolean;
  required: boolean;
  rack: boolean;
  durationMs: number;
  maxQueueMs: number;
}

function shapeOf(spec: Record<string, unknown>): Shape {
  const loc = (spec.locality ?? {}) as { mode?: string; scope?: string; required?: boolean };
  return {
    tasks: spec.tasks as number,
    gang: spec.mode === 'gang',
    spread: loc.mode === 'spread',
    pack: loc.mode === 'pack' && loc.required === true,
    required: loc.required !== false,
    rack: loc.scope === 'rack',
    // The simulated executor runs a task without a duration (a command) for 1 s.
    durationMs: typeof spec.durationMs === 'number' ? spec.durationMs : 1000,
    maxQueueMs: typeof spec.maxQueueMs === 'number' ? spec.maxQueueMs : 30_000,
  };
}

/** Can the demo cell ever run this valid spec? (the rules of the brief: constraints, gang size, required spread) */
function feasibility(spec: Record<string, unknown>): { ok: boolean; why: string } {
  const e = eligible(spec);
  const s = shapeOf(spec);
  if (e.servers === 0) return { ok: false, why: 'no server matches the constraints' };
  if (s.gang && s.tasks > e.rus) return { ok: false, why: `gang of ${s.tasks} > ${e.rus} eligible RUs` };
  if (s.spread && s.required && s.tasks > (s.rack ? e.racks : e.servers))
    return { ok: false, why: `required spread of ${s.tasks} over ${s.rack ? e.racks : e.servers} ${s.rack ? 'racks' : 'servers'}` };
  if (s.pack && s.tasks > (s.rack ? e.rackRus : e.serverRus))
    return { ok: false, why: `required pack of ${s.tasks} on one ${s.rack ? 'rack' : 'server'} of at most ${s.rack ? e.rackRus : e.serverRus} RUs` };
  return { ok: true, why: 'valid and feasible' };
}

/** A lower bound of the job's run time alone in the idle cell. */
function aloneMs(spec: Record<string, unknown>): number {
  const e = eligible(spec);
  const s = shapeOf(spec);
  // The job's own tasks sharing a server slow each other down (the monitors' simulated executor
  // runs the ground-truth model): count the worst case, a server full of them.
  const perTask = s.durationMs * selfSlowdown(spec, s);
  // However short its tasks, a job has not ended before its last task was placed, started and
  // freed: the cell does a few hundred of those a second.
  const floor = s.tasks * TASK_FLOOR_MS;
  if (s.gang) return Math.max(perTask, floor);
  const par = s.spread && s.required ? Math.min(e.rus, s.rack ? e.racks : e.servers) : e.rus;
  return Math.max(Math.ceil(s.tasks / Math.max(1, par)) * perTask, floor);
}

/** What one task costs the test cell at least, from placement to its RU freed, whatever its duration (ms). */
const TASK_FLOOR_MS = 2;

/** The job's declared interference vector (a catalog workload's or its inline profile's). */
function causedOf(spec: Record<string, unknown>): readonly number[] | undefined {
  const p = spec.profile;
  const caused = typeof p === 'string' ? catalog.workloads.get(p)?.caused : (p as { caused?: number[] } | undefined)?.caused;
  return Array.isArray(caused) ? caused : undefined;
}

/** Slowdown of one task of the job on an eligible server filled with tasks of the same job. */
function selfSlowdown(spec: Record<string, unknown>, s: Shape): number {
  const caused = causedOf(spec);
  if (!caused) return 1;
  let worst = 1;
  for (const srv of eligibleServers(spec)) {
    const k = s.spread && s.required && !s.rack ? 1 : Math.min(s.tasks, srv.rus);
    worst = Math.max(
      worst,
      perfSlowdown(
        caused,
        caused.map((x) => x * k),
        srv.rus,
      ),
    );
  }
  return worst;
}

/**
 * How long the scenario's work may keep the RUs this job can use busy (ms): each accepted job's
 * tasks, each slowed as a server full of the scenario's most aggressive vectors would slow it
 * (the simulated executor runs the ground-truth model), spread evenly over the RUs that job may
 * use; the share that falls on this job's RUs, over their number; plus the cell's floor for every
 * task placed. A job with that much work in its way (other jobs' priorities, its own narrower
 * constraints) may still be running at the end.
 */
export function contendedMs(spec: Record<string, unknown>, all: readonly Record<string, unknown>[]): number {
  const mine = new Set(eligibleServers(spec).map((s) => s.id));
  const mineRus = DEMO_SERVERS.reduce((n, s) => n + (mine.has(s.id) ? s.rus : 0), 0);
  if (mineRus === 0) return 0;
  const vectors = all.map(causedOf).filter((v): v is readonly number[] => v !== undefined);
  const fiercest = Array.from({ length: N_RESOURCES }, (_, i) => Math.max(0, ...vectors.map((v) => v[i] ?? 0)));
  let work = 0;
  let tasks = 0;
  for (const other of all) {
    const s = shapeOf(other);
    const servers = eligibleServers(other);
    const theirs = servers.reduce((n, x) => n + x.rus, 0);
    if (theirs === 0) continue;
    const shared = servers.reduce((n, x) => n + (mine.has(x.id) ? x.rus : 0), 0);
    const caused = causedOf(other);
    let slow = 1;
    if (caused)
      for (const srv of servers)
        slow = Math.max(
          slow,
          perfSlowdown(
            caused,
            caused.map((c, i) => c + (fiercest[i] ?? 0) * (srv.rus - 1)),
            srv.rus,
          ),
        );
    work += (s.tasks * s.durationMs * slow * shared) / theirs;
    tasks += s.tasks;
  }
  return work / mineRus + tasks * TASK_FLOOR_MS;
}

export function buildSpec(c: SpecCase): Built {
  let text: string;
  let exp: Expectation;
  const INVALID = grpc.status.INVALID_ARGUMENT;
  if (c.kind === 'raw') {
    text = rawText(c.raw, c.n);
    exp = { codes: [INVALID], fields: RAW_FIELDS[c.raw], why: `raw ${c.raw}` };
  } else if (c.kind === 'invalid') {
    const spec: Record<string, unknown> = { ...c.spec };
    if (c.mutation.remove) delete spec[c.mutation.key];
    else spec[c.mutation.key] = c.mutation.value;
    // Without a duration a spec needs a command: removing the duration must leave none.
    if (c.mutation.key === 'durationMs') delete spec.command;
    text = specText(spec);
    exp = { codes: [INVALID], fields: c.mutation.fields, why: `invalid ${c.mutation.key}` };
  } else {
    text = specText(c.spec);
    const spec = JSON.parse(text) as Record<string, unknown>;
    const f = feasibility(spec);
    exp =
      shapeOf(spec).pack && spec.mode !== 'gang'
        ? { codes: [INVALID], fields: ['locality.required'], why: 'a required pack needs mode gang' }
        : { codes: [f.ok ? grpc.status.OK : grpc.status.FAILED_PRECONDITION], fields: [], spec, feasible: f.ok, why: f.why };
  }
  const bytes = Buffer.byteLength(text);
  if (bytes > MAX_SPEC_BYTES) {
    // The size rule comes first; past the gRPC message limit the transport refuses the call.
    exp = {
      codes: bytes + 64 > MAX_GRPC_REQUEST ? [INVALID, grpc.status.RESOURCE_EXHAUSTED] : [INVALID],
      fields: ['spec_json'],
      why: `spec of ${bytes} bytes`,
    };
  } else if (c.kind === 'valid' && bytes > MAX_SPEC_BYTES - 8192) {
    // Close to the limit the stored job (spec plus resolved profile) may pass 64 KiB.
    exp = { ...exp, codes: [...exp.codes, INVALID], fields: ['(root)', 'spec_json'], why: `${exp.why}; ${bytes} bytes, close to the limit` };
  }
  return { text, bytes, exp };
}

/** The spec as the front-end stores it, without id and time: what makes two submissions the same job. */
function canonical(text: string): string | undefined {
  try {
    const j = parseJobSpec(JSON.parse(text) as unknown, catalog, { id: '', now: 0 });
    return JSON.stringify(j);
  } catch {
    return undefined;
  }
}

// ---------------------------------------------------------------------------------------------
// Checks

export const PROPERTIES = {
  'submit-status':
    'SubmitJob answers OK, INVALID_ARGUMENT naming the field, FAILED_PRECONDITION or ALREADY_EXISTS, as the spec and the cell call for; RESOURCE_EXHAUSTED only when the open jobs could hold more unplaced tasks than the limit',
  'unknown-id': 'Get/Cancel/Explain/Watch of an unknown job id answer NOT_FOUND promptly (a malformed id: INVALID_ARGUMENT or NOT_FOUND)',
  'list-filter': 'ListJobs with an unknown state answers INVALID_ARGUMENT; valid filters and limits are honoured',
  'call-status': 'calls on existing jobs and GetCluster answer OK within their deadline',
  'no-persist-on-reject': 'a refused submit writes no job, owner or request key',
  'watch-final-once': 'every WatchJob stream of an accepted job shows its final state in exactly one (complete) event, then ends with OK',
  'watch-revisions': 'revisions along a WatchJob stream never decrease; parts of one event share its revision; a revision never reappears after more=false',
  'final-or-waiting':
    'by the end each accepted job is final, visibly waiting (queued/admitted with a message) or still working through more work than fits the run',
  'idle-wait': 'a feasible job does not wait in an idle cell',
  cancel: 'CancelJob at the end makes every job that is not final cancelled within a few seconds',
  'no-ru-leak': 'once every job is final the cell shows no busy RU',
  health: 'grpc.health.v1 answers SERVING',
} as const;
export type PropertyName = keyof typeof PROPERTIES;

export interface Violation {
  property: PropertyName;
  message: string;
}

interface Outcome<T> {
  code: grpc.status;
  details: string;
  field: string;
  value?: T;
  ms: number;
}

function unary<T>(fn: (opts: grpc.CallOptions, cb: (err: grpc.ServiceError | null, res?: T) => void) => unknown, deadlineMs: number): Promise<Outcome<T>> {
  const t0 = Date.now();
  return new Promise((resolve) => {
    fn({ deadline: new Date(Date.now() + deadlineMs) }, (err, res) => {
      const ms = Date.now() - t0;
      if (err) {
        const f = err.metadata?.get('tarcil-field')[0];
        resolve({ code: err.code, details: err.details ?? err.message, field: typeof f === 'string' ? f : '', ms });
      } else resolve({ code: grpc.status.OK, details: '', field: '', value: res, ms });
    });
  });
}

const codeName = (c: grpc.status): string => grpc.status[c] ?? String(c);
const clip = (s: string, n = 300): string => (s.length > n ? `${s.slice(0, n)}... (${s.length} chars)` : s);

/** One WatchJob stream, checked as events arrive. */
class Watch {
  events = 0;
  finalEvents = 0;
  /** When the first complete final event arrived (ms since the epoch). */
  finalAt: number | undefined;
  finalRevs = new Set<number>();
  lastRev = -1;
  lastMore = false;
  lastState = '';
  problems: { property: PropertyName; message: string }[] = [];
  status: { code: grpc.status; details: string } | undefined;
  readonly done: Promise<void>;
  private readonly call: grpc.ClientReadableStream<JobEvent__Output>;

  constructor(
    c: SchedulerClient,
    readonly jobId: string,
    deadlineMs: number,
  ) {
    this.call = c.WatchJob({ jobId }, { deadline: new Date(Date.now() + deadlineMs) });
    this.call.on('data', (ev: JobEvent__Output) => this.onEvent(ev));
    this.call.on('error', () => undefined); // the status event carries the code
    this.done = new Promise((resolve) => {
      this.call.on('status', (st: grpc.StatusObject) => {
        this.status = { code: st.code, details: st.details };
        resolve();
      });
    });
  }

  private onEvent(ev: JobEvent__Output): void {
    const rev = Number(ev.revision);
    const state = ev.job?.state ?? '';
    const at = `event ${this.events + 1} (revision ${rev}, more=${ev.more}, state ${state || '-'})`;
    if (!ev.job) this.problems.push({ property: 'watch-final-once', message: `${at} has no job summary` });
    else if (ev.job.id !== this.jobId) this.problems.push({ property: 'watch-final-once', message: `${at} is about job ${ev.job.id}` });
    if (this.events > 0) {
      if (this.lastMore && rev !== this.lastRev)
        this.problems.push({ property: 'watch-revisions', message: `${at} follows a part with more=true at revision ${this.lastRev}` });
      if (!this.lastMore && rev <= this.lastRev)
        this.problems.push({ property: 'watch-revisions', message: `${at} after revision ${this.lastRev} with more=false` });
    }
    if (this.finalEvents > 0 && !(this.lastMore && rev === this.lastRev))
      this.problems.push({ property: 'watch-final-once', message: `${at} after the final event` });
    if (FINAL.has(state)) {
      this.finalRevs.add(rev);
      if (!ev.more) {
        this.finalEvents++;
        this.finalAt ??= Date.now();
      }
    }
    this.events++;
    this.lastRev = rev;
    this.lastMore = ev.more;
    this.lastState = state;
  }

  cancel(): void {
    this.call.cancel();
  }
}

interface Accepted {
  jobId: string;
  text: string;
  rid?: string;
  spec: Record<string, unknown>;
  feasible: boolean;
  submittedAt: number;
  watches: Watch[];
  /** The state the end-of-run CancelJob answered with, when it was called. */
  cancelAnswer?: string;
  /** Its final summary, once seen. */
  final?: JobSummary;
}

export interface ScenarioStats {
  commands: Record<string, number>;
  codes: Record<string, number>;
  accepted: number;
  acceptedTasks: number;
  maxTasksAccepted: number;
  finalStates: Record<string, number>;
  cancelledAtEnd: number;
  waitingAtEnd: number;
  workingAtEnd: number;
  watchEvents: number;
}

export function emptyStats(): ScenarioStats {
  return {
    commands: {},
    codes: {},
    accepted: 0,
    acceptedTasks: 0,
    maxTasksAccepted: 0,
    finalStates: {},
    cancelledAtEnd: 0,
    waitingAtEnd: 0,
    workingAtEnd: 0,
    watchEvents: 0,
  };
}

function bump(m: Record<string, number>, k: string, by = 1): void {
  m[k] = (m[k] ?? 0) + by;
}

export function mergeStats(into: ScenarioStats, s: ScenarioStats): void {
  for (const [k, v] of Object.entries(s.commands)) bump(into.commands, k, v);
  for (const [k, v] of Object.entries(s.codes)) bump(into.codes, k, v);
  for (const [k, v] of Object.entries(s.finalStates)) bump(into.finalStates, k, v);
  into.accepted += s.accepted;
  into.acceptedTasks += s.acceptedTasks;
  into.maxTasksAccepted = Math.max(into.maxTasksAccepted, s.maxTasksAccepted);
  into.cancelledAtEnd += s.cancelledAtEnd;
  into.waitingAtEnd += s.waitingAtEnd;
  into.workingAtEnd += s.workingAtEnd;
  into.watchEvents += s.watchEvents;
}

export interface Timing {
  /** Unary call deadline. */
  callMs: number;
  /** WatchJob of an unknown id must answer within this. */
  watchNotFoundMs: number;
  /** After the last call: how long jobs get to become final or visibly waiting. */
  settleMs: number;
  /** A feasible job waiting this long while the cell is idle breaks `idle-wait`. */
  idleWaitMs: number;
  /** After CancelJob: how long a job gets to become cancelled. */
  cancelMs: number;
  /** How long the cell gets to show no busy RU once every job is final. */
  drainMs: number;
  /** A job whose work alone (or the scenario's work over the cell) exceeds this may still be running at the end. */
  heavyMs: number;
}

export const DEFAULT_TIMING: Timing = { callMs: 10_000, watchNotFoundMs: 5000, settleMs: 6000, idleWaitMs: 3000, cancelMs: 5000, drainMs: 5000, heavyMs: 1500 };

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

async function jobKeys(cell: ApiCell): Promise<{ jobs: Set<string>; requests: Set<string>; owners: Set<string> }> {
  const [jobs, requests, owners] = await Promise.all([
    cell.audit.range(cell.keys.jobs()),
    cell.audit.range(`${cell.prefix}requests/`),
    cell.audit.range(cell.keys.owners()),
  ]);
  return { jobs: new Set(jobs.kvs.map((kv) => kv.key)), requests: new Set(requests.kvs.map((kv) => kv.key)), owners: new Set(owners.kvs.map((kv) => kv.key)) };
}

function added(before: Set<string>, after: Set<string>): string[] {
  return [...after].filter((k) => !before.has(k));
}

const HealthClient = grpc.makeGenericClientConstructor(healthService, 'Health');

/** The grpc.health.v1 status of the front-end ('' = the whole server). */
export function healthCheck(address: string, service = '', deadlineMs = 5000): Promise<string> {
  const check = healthService.Check;
  if (!check) return Promise.resolve('no Check method in grpc.health.v1');
  const h = new HealthClient(address, grpc.credentials.createInsecure());
  return new Promise<string>((resolve) => {
    h.makeUnaryRequest(
      check.path,
      (arg: { service: string }) => check.requestSerialize(arg),
      (buf: Buffer) => check.responseDeserialize(buf) as { status: string | number },
      { service },
      { deadline: new Date(Date.now() + deadlineMs) },
      (err: grpc.ServiceError | null, res?: { status: string | number }) => {
        h.close();
        resolve(err ? `error ${codeName(err.code)}: ${err.details}` : String(res?.status));
      },
    );
  });
}

/**
 * Runs one scenario and returns what broke. Calls are made one at a time; every job the scenario
 * submits is watched from its acknowledgement to its end.
 */
export async function runScenario(cell: ApiCell, cmds: readonly Cmd[], t: Timing = DEFAULT_TIMING, stats: ScenarioStats = emptyStats()): Promise<Violation[]> {
  const c = cell.client;
  const out: Violation[] = [];
  const fail = (property: PropertyName, message: string): void => {
    out.push({ property, message });
  };
  const jobs: Accepted[] = [];
  const byId = new Map<string, Accepted>();
  const watchDeadline = t.settleMs + t.cancelMs + t.drainMs + 60_000 + cmds.length * 2 * t.callMs;
  const nonce = randomBytes(4).toString('hex');
  let ridSeq = 0;
  const freshRid = (long: boolean): string => {
    const id = `rid-${nonce}-${ridSeq++}`;
    return long ? id.padEnd(128, '.') : id;
  };
  const pickJob = (i: number): Accepted | undefined => (jobs.length === 0 ? undefined : jobs[i % jobs.length]);
  const targetId = (tg: Target): { id: string; job?: Accepted; known: boolean; malformed: boolean } => {
    if (tg.kind === 'job') {
      const j = pickJob(tg.pick);
      if (j) return { id: j.jobId, job: j, known: true, malformed: false };
      return { id: `zz-none-${nonce}`, known: false, malformed: false };
    }
    return { id: tg.id, known: false, malformed: tg.kind === 'malformed' };
  };

  /**
   * An upper bound on the tasks the front-end holds unplaced: every task of each accepted job not
   * seen final (or seen final so recently that the front-end's cached count may still hold it).
   */
  const unplacedBound = (): number => {
    const now = Date.now();
    let n = 0;
    for (const j of jobs) {
      const finalAt = Math.min(...j.watches.map((w) => w.finalAt ?? Infinity));
      if (finalAt + PENDING_CACHE_GRACE_MS > now) n += typeof j.spec.tasks === 'number' ? j.spec.tasks : 0;
    }
    return n;
  };

  const submitOnce = async (what: string, text: string, rid: string, exp0: Expectation, same?: Accepted): Promise<void> => {
    const before = await jobKeys(cell);
    // A new, valid, feasible job may meet back-pressure when the open jobs could fill the limit.
    let exp = exp0;
    const tasksAsked = typeof exp0.spec?.tasks === 'number' ? exp0.spec.tasks : 0;
    const bound = unplacedBound();
    if (!same && exp0.codes.includes(grpc.status.OK) && bound > 0 && bound + tasksAsked > MAX_PENDING_TASKS) {
      exp = {
        ...exp0,
        codes: [...exp0.codes, grpc.status.RESOURCE_EXHAUSTED],
        why: `${exp0.why}; open jobs may hold up to ${bound} unplaced tasks (limit ${MAX_PENDING_TASKS})`,
      };
    }
    const r = await unary<SubmitJobResponse__Output>((o, cb) => c.SubmitJob({ specJson: text, requestId: rid }, o, cb), t.callMs);
    bump(stats.codes, `SubmitJob ${codeName(r.code)}`);
    const show = `${what} ${clip(text, 400)}${rid ? ` (request_id ${clip(rid, 40)})` : ''}`;
    if (!exp.codes.includes(r.code)) {
      fail(
        'submit-status',
        `SubmitJob answered ${codeName(r.code)} (${clip(r.details)}) in ${r.ms} ms; expected ${exp.codes.map(codeName).join(' or ')} (${exp.why}): ${show}`,
      );
    } else if (r.code === grpc.status.INVALID_ARGUMENT && !exp.fields.includes('(root)') && !exp.fields.some((f) => r.details.includes(f) || r.field === f)) {
      fail('submit-status', `INVALID_ARGUMENT does not name ${exp.fields.join(' or ')}: "${clip(r.details)}" for ${show}`);
    } else if (r.code !== grpc.status.OK && r.details.trim() === '') {
      fail('submit-status', `${codeName(r.code)} without details for ${show}`);
    } else if (r.code === grpc.status.RESOURCE_EXHAUSTED && exp !== exp0) {
      // The message states the count: it must be one the open jobs can explain and over the limit.
      const m = /holds (\d+) tasks not yet placed \(limit (\d+)/.exec(r.details);
      const held = m ? Number(m[1]) : NaN;
      if (!m || Number(m[2]) !== MAX_PENDING_TASKS)
        fail('submit-status', `RESOURCE_EXHAUSTED does not state the unplaced tasks and the limit ${MAX_PENDING_TASKS}: "${clip(r.details)}" for ${show}`);
      else if (held > bound || held + tasksAsked <= MAX_PENDING_TASKS)
        fail(
          'submit-status',
          `RESOURCE_EXHAUSTED with ${held} unplaced tasks for a job of ${tasksAsked} (limit ${MAX_PENDING_TASKS}; open jobs hold at most ${bound}): ${show}`,
        );
    }
    if (r.code !== grpc.status.OK) {
      const after = await jobKeys(cell);
      const extra = [...added(before.jobs, after.jobs), ...added(before.requests, after.requests), ...added(before.owners, after.owners)];
      if (extra.length > 0) fail('no-persist-on-reject', `SubmitJob answered ${codeName(r.code)} but wrote ${extra.join(', ')}: ${show}`);
      return;
    }
    const jobId = r.value?.jobId ?? '';
    if (jobId === '') {
      fail('submit-status', `SubmitJob answered OK without a job id: ${show}`);
      return;
    }
    if (same) {
      if (jobId !== same.jobId) fail('submit-status', `a retry with request_id ${rid} answered job ${jobId}, not the original ${same.jobId}: ${show}`);
      return;
    }
    if (byId.has(jobId)) {
      fail('submit-status', `SubmitJob answered job ${jobId} again for a new submission: ${show}`);
      return;
    }
    if (!exp.spec) {
      fail('submit-status', `SubmitJob accepted a spec the oracle expected to be refused: ${show}`);
      return;
    }
    const spec = exp.spec;
    const j: Accepted = {
      jobId,
      text,
      spec,
      feasible: exp.feasible ?? true,
      submittedAt: Date.now(),
      watches: [new Watch(c, jobId, watchDeadline)],
      ...(rid ? { rid } : {}),
    };
    jobs.push(j);
    byId.set(jobId, j);
    stats.accepted++;
    const tasks = typeof spec.tasks === 'number' ? spec.tasks : 0;
    stats.acceptedTasks += tasks;
    stats.maxTasksAccepted = Math.max(stats.maxTasksAccepted, tasks);
  };

  const checkExisting = (call: string, r: Outcome<unknown>, id: string): void => {
    bump(stats.codes, `${call} ${codeName(r.code)}`);
    if (r.code !== grpc.status.OK) fail('call-status', `${call} of existing job ${id} answered ${codeName(r.code)} (${clip(r.details)}) in ${r.ms} ms`);
  };
  const checkUnknown = (call: string, r: { code: grpc.status; details: string; ms: number }, id: string, malformed: boolean): void => {
    bump(stats.codes, `${call} ${codeName(r.code)}`);
    const ok = r.code === grpc.status.NOT_FOUND || (malformed && r.code === grpc.status.INVALID_ARGUMENT);
    if (!ok)
      fail(
        'unknown-id',
        `${call} of ${malformed ? 'malformed' : 'unknown'} id ${JSON.stringify(clip(id, 60))} answered ${codeName(r.code)} (${clip(r.details)}) after ${r.ms} ms; expected NOT_FOUND${malformed ? ' or INVALID_ARGUMENT' : ''}`,
      );
  };

  try {
    for (const cmd of cmds) {
      bump(stats.commands, cmd.op);
      switch (cmd.op) {
        case 'submit': {
          const b = buildSpec(cmd.spec);
          let exp = b.exp;
          let rid = '';
          if (cmd.rid.kind === 'fresh') rid = freshRid(cmd.rid.long);
          else if (cmd.rid.kind === 'bad') {
            rid = cmd.rid.id;
            // The spec is checked first; a valid one is then refused for its request id.
            if (exp.spec)
              exp = {
                codes: [grpc.status.INVALID_ARGUMENT],
                fields: exp.fields.includes('(root)') ? ['(root)'] : ['request_id'],
                why: `bad request_id ${JSON.stringify(rid)}`,
              };
          }
          await submitOnce('spec', b.text, rid, exp);
          break;
        }
        case 'retry': {
          const withRid = jobs.filter((j) => j.rid !== undefined);
          const orig = withRid.length === 0 ? undefined : withRid[cmd.pick % withRid.length];
          if (!orig?.rid) break;
          let text = orig.text;
          let exp: Expectation;
          if (cmd.variant === 'same') {
            exp = { codes: [grpc.status.OK], fields: [], why: 'the same spec with the same request_id' };
          } else {
            if (cmd.variant === 'renamed') {
              const spec = JSON.parse(orig.text) as Record<string, unknown>;
              const name = String(spec.name);
              spec.name = name.length < 128 ? `${name}r` : `r${name.slice(1)}`;
              text = JSON.stringify(spec);
              exp = { codes: [grpc.status.ALREADY_EXISTS], fields: [], why: 'another spec with a used request_id' };
            } else {
              const b = buildSpec(cmd.other);
              text = b.text;
              if (!b.exp.spec) exp = b.exp;
              else if (canonical(text) === canonical(orig.text))
                exp = { codes: [grpc.status.OK], fields: [], why: 'the same spec (after defaults) with the same request_id' };
              else if (b.exp.feasible === false)
                exp = {
                  codes: [grpc.status.ALREADY_EXISTS, grpc.status.FAILED_PRECONDITION],
                  fields: [],
                  why: `another spec (${b.exp.why}) with a used request_id`,
                };
              else
                exp = {
                  codes: [grpc.status.ALREADY_EXISTS, ...b.exp.codes.filter((x) => x === grpc.status.INVALID_ARGUMENT)],
                  fields: b.exp.fields,
                  why: 'another spec with a used request_id',
                };
            }
          }
          await submitOnce(`retry (${cmd.variant}) of ${orig.jobId}:`, text, orig.rid, exp, orig);
          break;
        }
        case 'get':
        case 'cancel':
        case 'explain': {
          const tg = targetId(cmd.target);
          const id = tg.id;
          const r =
            cmd.op === 'get'
              ? await unary<Job__Output>((o, cb) => c.GetJob({ jobId: id }, o, cb), t.callMs)
              : cmd.op === 'cancel'
                ? await unary<Job__Output>((o, cb) => c.CancelJob({ jobId: id }, o, cb), t.callMs)
                : await unary<Explanation__Output>((o, cb) => c.ExplainJob({ jobId: id }, o, cb), t.callMs);
          const call = cmd.op === 'get' ? 'GetJob' : cmd.op === 'cancel' ? 'CancelJob' : 'ExplainJob';
          if (tg.known) {
            checkExisting(call, r, id);
            const got = r.value as { id?: string; jobId?: string } | undefined;
            if (r.code === grpc.status.OK && (got?.id ?? got?.jobId) !== id)
              fail('call-status', `${call} of ${id} answered about ${got?.id ?? got?.jobId ?? '?'}`);
          } else checkUnknown(call, r, id, tg.malformed);
          break;
        }
        case 'watch': {
          const tg = targetId(cmd.target);
          if (tg.job) {
            tg.job.watches.push(new Watch(c, tg.id, watchDeadline));
            bump(stats.codes, 'WatchJob opened');
            break;
          }
          const t0 = Date.now();
          const w = new Watch(c, tg.id, t.watchNotFoundMs);
          await w.done;
          const st = w.status ?? { code: grpc.status.UNKNOWN, details: 'no status' };
          checkUnknown('WatchJob', { ...st, ms: Date.now() - t0 }, tg.id, tg.malformed);
          if (w.events > 0) fail('unknown-id', `WatchJob of unknown id ${tg.id} sent ${w.events} events`);
          break;
        }
        case 'list': {
          const r = await unary<ListJobsResponse__Output>((o, cb) => c.ListJobs({ states: cmd.states, limit: cmd.limit }, o, cb), t.callMs);
          bump(stats.codes, `ListJobs ${codeName(r.code)}`);
          const unknown = cmd.states.filter((s) => !JOB_STATES.includes(s));
          const show = `ListJobs(states=${JSON.stringify(cmd.states.map((s) => clip(s, 20)))}, limit=${cmd.limit})`;
          if (unknown.length > 0) {
            if (r.code !== grpc.status.INVALID_ARGUMENT)
              fail(
                'list-filter',
                `${show} answered ${codeName(r.code)} (${clip(r.details)}); expected INVALID_ARGUMENT for ${JSON.stringify(clip(unknown[0] ?? '', 20))}`,
              );
            else if (!/states/.test(r.details) && !/states/.test(r.field))
              fail('list-filter', `${show}: INVALID_ARGUMENT does not name states: ${clip(r.details)}`);
          } else if (r.code !== grpc.status.OK) {
            fail('list-filter', `${show} answered ${codeName(r.code)} (${clip(r.details)})`);
          } else {
            const got = r.value?.jobs ?? [];
            if (cmd.limit > 0 && got.length > cmd.limit) fail('list-filter', `${show} returned ${got.length} jobs`);
            const wrong = cmd.states.length > 0 ? got.filter((j) => !cmd.states.includes(j.state)) : [];
            if (wrong.length > 0) fail('list-filter', `${show} returned job ${wrong[0]?.id} in state ${wrong[0]?.state}`);
          }
          break;
        }
        case 'cluster': {
          const r = await unary<Cluster__Output>((o, cb) => c.GetCluster({}, o, cb), t.callMs);
          checkExisting('GetCluster', r, '(cluster)');
          if (r.value && (r.value.rus !== CELL_RUS || r.value.servers.length !== DEMO_SERVERS.length))
            fail('call-status', `GetCluster shows ${r.value.rus} RUs on ${r.value.servers.length} servers`);
          break;
        }
        case 'pause':
          await sleep(cmd.ms);
          break;
      }
    }
    await finish(cell, jobs, t, fail, stats);
  } finally {
    for (const j of jobs) for (const w of j.watches) if (!w.status) w.cancel();
  }
  return out;
}

type Fail = (p: PropertyName, m: string) => void;

interface JobSummary {
  id: string;
  state: string;
  message: string;
  taskStates: Record<string, number>;
  cancelRequested: boolean;
}

function toSummary(j: Job__Output): JobSummary {
  return { id: j.id, state: j.state, message: j.message, taskStates: j.taskStates, cancelRequested: j.cancelRequested };
}

/** Jobs that are not final, by ListJobs with a state filter. */
async function openJobs(cell: ApiCell, t: Timing, fail: Fail): Promise<Map<string, JobSummary> | undefined> {
  const r = await unary<ListJobsResponse__Output>((o, cb) => cell.client.ListJobs({ states: OPEN_STATES, limit: 0 }, o, cb), t.callMs);
  if (r.code !== grpc.status.OK) {
    fail('call-status', `ListJobs answered ${codeName(r.code)} (${clip(r.details)})`);
    return undefined;
  }
  return new Map((r.value?.jobs ?? []).map((j) => [j.id, toSummary(j)]));
}

/**
 * The scenario's jobs now: those ListJobs shows as open, and for the others their GetJob (a final
 * state, once read, is kept: it cannot change).
 */
async function jobStates(cell: ApiCell, jobs: readonly Accepted[], t: Timing, fail: Fail): Promise<Map<string, JobSummary> | undefined> {
  const open = await openJobs(cell, t, fail);
  if (!open) return undefined;
  const out = new Map<string, JobSummary>();
  for (const j of jobs) {
    const s = open.get(j.jobId);
    if (s && !FINAL.has(s.state)) {
      out.set(j.jobId, s);
      continue;
    }
    if (j.final) {
      out.set(j.jobId, j.final);
      continue;
    }
    const r = await unary<Job__Output>((o, cb) => cell.client.GetJob({ jobId: j.jobId }, o, cb), t.callMs);
    if (r.code !== grpc.status.OK || !r.value) {
      fail('call-status', `GetJob of existing job ${j.jobId} answered ${codeName(r.code)} (${clip(r.details)}) in ${r.ms} ms`);
      return undefined;
    }
    const g = toSummary(r.value);
    if (FINAL.has(g.state)) j.final = g;
    out.set(j.jobId, g);
  }
  return out;
}

async function busyRus(cell: ApiCell, t: Timing, fail: Fail): Promise<{ busy: number; detail: string } | undefined> {
  const r = await unary<Cluster__Output>((o, cb) => cell.client.GetCluster({}, o, cb), t.callMs);
  if (r.code !== grpc.status.OK || !r.value) {
    fail('call-status', `GetCluster answered ${codeName(r.code)} (${clip(r.details)})`);
    return undefined;
  }
  const held = r.value.servers.flatMap((s) =>
    s.rus.filter((u) => u.state === 'busy' || u.state === 'reserved').map((u) => `${s.id}/${u.index} ${u.state} by ${u.job}#${u.task}`),
  );
  return { busy: r.value.busy, detail: held.slice(0, 6).join(', ') };
}

/** What admission control saw for a job, and its free-RU counters next to the cell's (for idle-wait reports). */
async function admissionView(cell: ApiCell, jobId: string, t: Timing): Promise<string> {
  const [e, cl] = await Promise.all([
    unary<Explanation__Output>((o, cb) => cell.client.ExplainJob({ jobId }, o, cb), t.callMs),
    unary<Cluster__Output>((o, cb) => cell.client.GetCluster({}, o, cb), t.callMs),
  ]);
  const v = e.value?.admission[e.value.admission.length - 1];
  const verdict = v
    ? `last admission verdict ${v.action} (${clip(v.reason, 120)}; acceptable free ${v.acceptableFree}, total free ${v.totalFree}, needed ${v.needed})`
    : `no admission verdict (ExplainJob ${codeName(e.code)})`;
  const buckets = cl.value
    ? `admission buckets show ${cl.value.buckets.reduce((a, b) => a + b.free, 0)} of ${cl.value.buckets.reduce((a, b) => a + b.rus, 0)} RUs free, the cell ${cl.value.free} of ${cl.value.rus}`
    : '';
  return `${verdict}; ${buckets}`;
}

const describeJob = (j: Accepted, s: JobSummary | undefined): string =>
  `job ${j.jobId} ${clip(j.text, 300)}: ${s ? `${s.state}${s.cancelRequested ? ' (cancel requested)' : ''}, tasks ${JSON.stringify(s.taskStates)}, message "${clip(s.message, 200)}"` : 'not listed'}`;

/** The end of a scenario: settle, judge, cancel what is left, then check streams, RUs and health. */
async function finish(cell: ApiCell, jobs: Accepted[], t: Timing, fail: Fail, stats: ScenarioStats): Promise<void> {
  const c = cell.client;
  const demandMs = jobs.reduce((a, j) => a + shapeOf(j.spec).tasks * shapeOf(j.spec).durationMs, 0) / CELL_RUS;
  const specs = jobs.map((j) => j.spec);
  // Judged once per job: the settle loop below asks every 100 ms.
  const inWay = new Map(jobs.map((j) => [j, contendedMs(j.spec, specs)]));
  const heavy = (j: Accepted): boolean => aloneMs(j.spec) > t.heavyMs || demandMs > t.heavyMs || (inWay.get(j) ?? 0) > t.heavyMs;

  // 1. Settle: until every job is final, visibly waiting, or working through a lot of work.
  const idleSince = new Map<string, number>();
  const idleReported = new Set<string>();
  const deadline = Date.now() + t.settleMs;
  let last: Map<string, JobSummary> | undefined;
  for (;;) {
    const [list, cl] = await Promise.all([jobStates(cell, jobs, t, fail), busyRus(cell, t, fail)]);
    if (!list || !cl) return;
    last = list;
    const now = Date.now();
    let pending = false;
    for (const j of jobs) {
      const s = list.get(j.jobId);
      if (!s) {
        pending = true;
        continue;
      }
      if (FINAL.has(s.state)) continue;
      if (WAITING.has(s.state)) {
        if (s.message.trim() === '') pending = true;
        if (cl.busy === 0 && j.feasible && !idleReported.has(j.jobId)) {
          const since = idleSince.get(j.jobId) ?? now;
          idleSince.set(j.jobId, since);
          if (now - since >= t.idleWaitMs) {
            idleReported.add(j.jobId);
            fail(
              'idle-wait',
              `${describeJob(j, s)}: still ${s.state} after ${now - since} ms with every RU of the cell free; ${await admissionView(cell, j.jobId, t)}`,
            );
          } else pending = true;
        } else idleSince.delete(j.jobId);
      } else {
        idleSince.delete(j.jobId);
        if (!heavy(j)) pending = true;
      }
    }
    if (!pending) break;
    if (now > deadline) break;
    await sleep(100);
  }

  // 2. Judge what is not final.
  for (const j of jobs) {
    const s = last?.get(j.jobId);
    if (!s) {
      fail('final-or-waiting', `job ${j.jobId} is not listed by ListJobs: ${clip(j.text)}`);
      continue;
    }
    if (FINAL.has(s.state)) continue;
    if (WAITING.has(s.state)) {
      stats.waitingAtEnd++;
      if (s.message.trim() === '') fail('final-or-waiting', `${describeJob(j, s)}: waits without saying why, ${Date.now() - j.submittedAt} ms after submit`);
    } else {
      stats.workingAtEnd++;
      if (!heavy(j))
        fail(
          'final-or-waiting',
          `${describeJob(j, s)}: not final ${Date.now() - j.submittedAt} ms after submit, though it needs about ${aloneMs(j.spec)} ms alone in the cell and the scenario's work in its way about ${Math.round(inWay.get(j) ?? 0)} ms (limit ${t.heavyMs})`,
        );
    }
  }

  // 3. Cancel every job that is not final; each must become cancelled.
  const toCancel = jobs.filter((j) => !FINAL.has(last?.get(j.jobId)?.state ?? ''));
  for (const j of toCancel) {
    const r = await unary<Job__Output>((o, cb) => c.CancelJob({ jobId: j.jobId }, o, cb), t.callMs);
    bump(stats.codes, `CancelJob(end) ${codeName(r.code)}`);
    if (r.code !== grpc.status.OK) fail('cancel', `CancelJob answered ${codeName(r.code)} (${clip(r.details)}) for ${describeJob(j, last?.get(j.jobId))}`);
    j.cancelAnswer = r.value?.state ?? '';
  }
  if (toCancel.length > 0) {
    const t0 = Date.now();
    for (;;) {
      const list = await jobStates(cell, toCancel, t, fail);
      if (!list) return;
      for (const [k, v] of list) last.set(k, v);
      if (toCancel.every((j) => FINAL.has(list.get(j.jobId)?.state ?? ''))) break;
      if (Date.now() - t0 > t.cancelMs) break;
      await sleep(100);
    }
    const waited = Date.now() - t0;
    for (const j of toCancel) {
      const s = last.get(j.jobId);
      stats.cancelledAtEnd++;
      if (!s || !FINAL.has(s.state)) {
        fail('cancel', `${describeJob(j, s)}: not final ${waited} ms after CancelJob (which answered ${j.cancelAnswer || '-'})`);
      } else if (s.state !== 'cancelled') {
        // A job whose last task ended as the cancel arrived may finish normally; one with a task cancelled may not.
        const raced = FINAL.has(j.cancelAnswer ?? '') || (s.taskStates.cancelled ?? 0) === 0;
        if (!raced) fail('cancel', `${describeJob(j, s)}: ended ${s.state}, not cancelled, after CancelJob`);
      }
    }
  }
  for (const j of jobs) bump(stats.finalStates, last?.get(j.jobId)?.state ?? 'unlisted');

  // 4. Watch streams: each ends after exactly one final event.
  const streamsBy = Date.now() + t.drainMs;
  for (const j of jobs) {
    for (const w of j.watches) {
      const left = streamsBy - Date.now();
      if (!w.status && left > 0) await Promise.race([w.done, sleep(left)]);
      stats.watchEvents += w.events;
      const where = `WatchJob of ${j.jobId} (${w.events} events, last state ${w.lastState || '-'})`;
      for (const p of w.problems.slice(0, 3)) fail(p.property, `${where}: ${p.message}`);
      const finalNow = FINAL.has(last?.get(j.jobId)?.state ?? '');
      if (!w.status) {
        if (finalNow) fail('watch-final-once', `${where}: still open ${t.drainMs} ms after the job became ${last?.get(j.jobId)?.state}`);
        continue;
      }
      if (w.status.code !== grpc.status.OK) fail('watch-final-once', `${where}: ended with ${codeName(w.status.code)} (${clip(w.status.details)})`);
      else if (w.finalEvents !== 1)
        fail('watch-final-once', `${where}: ended OK after ${w.finalEvents} complete final events (revisions ${[...w.finalRevs].join(', ') || '-'})`);
      else if (w.finalRevs.size !== 1) fail('watch-final-once', `${where}: final state at ${w.finalRevs.size} revisions (${[...w.finalRevs].join(', ')})`);
      else if (w.lastMore) fail('watch-revisions', `${where}: the last event has more=true`);
    }
  }

  // 5. No RU held once everything is final.
  if (jobs.every((j) => FINAL.has(last?.get(j.jobId)?.state ?? ''))) {
    const t0 = Date.now();
    for (;;) {
      const cl = await busyRus(cell, t, fail);
      if (!cl) break;
      if (cl.busy === 0) break;
      if (Date.now() - t0 > t.drainMs) {
        fail('no-ru-leak', `${cl.busy} RUs busy ${Date.now() - t0} ms after every job of the scenario was final: ${cl.detail}`);
        break;
      }
      await sleep(100);
    }
  }

  // 6. Health.
  const h = await healthCheck(cell.address);
  if (h !== 'SERVING') fail('health', `grpc.health.v1 Check answered ${h}`);
}

// ---------------------------------------------------------------------------------------------
// The property

export interface PropertyOptions extends CellOptions {
  numRuns: number;
  /** Stop starting new runs (and shrinking) after this long. */
  timeLimitMs: number;
  seed?: number;
  path?: string;
  /** Run EXAMPLE_SCENARIOS first (default true; keep it when replaying a seed and path). */
  examples?: boolean;
  /** Only these properties fail a run (all by default); the others are still counted. */
  only?: PropertyName[];
  /** Start a fresh cell (new key prefix) after this many scenarios, so long runs do not slow down as jobs pile up. */
  recycleEvery?: number;
  timing?: Partial<Timing>;
  /** Progress lines (the bench prints them). */
  onProgress?: (line: string) => void;
}

export interface PropertyResult {
  kind: StoreKind;
  ok: boolean;
  /** fast-check's report (seed, path, counterexample, error) when the property failed. */
  report: string;
  numRuns: number;
  numShrinks: number;
  interrupted: boolean;
  seed: number;
  elapsedMs: number;
  stats: ScenarioStats;
  /** Violations per property over every run, including shrinking. */
  violations: Record<string, number>;
  /** The first message seen per property. */
  examples: Record<string, string>;
  /** Fresh cells started because a failed scenario left the cell busy. */
  cellRestarts: number;
  /** Fresh cells started by recycleEvery. */
  cellRecycles: number;
  health: string;
  /** The first failure message (the minimal counterexample's, after shrinking). */
  error: string;
}

export function parseOnly(v: string | undefined): PropertyName[] | undefined {
  if (!v) return undefined;
  const names = v
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  for (const n of names) if (!(n in PROPERTIES)) throw new Error(`unknown property '${n}' (known: ${Object.keys(PROPERTIES).join(', ')})`);
  return names as PropertyName[];
}

/** Starts a cell, runs the property with fast-check, closes the cell. */
export async function runApiProperty(o: PropertyOptions): Promise<PropertyResult> {
  const t: Timing = { ...DEFAULT_TIMING, ...o.timing };
  const t0 = Date.now();
  let cell = await startApiCell(o);
  let restarts = 0;
  let recycles = 0;
  let sinceStart = 0;
  const stats = emptyStats();
  const violations: Record<string, number> = {};
  const examples: Record<string, string> = {};
  let inflight: Promise<unknown> = Promise.resolve();
  let runs = 0;

  /** A failed run may leave jobs behind: cancel them, or start a fresh cell so the next run is independent. */
  const ensureClean = async (): Promise<void> => {
    if (o.recycleEvery !== undefined && sinceStart >= o.recycleEvery) {
      recycles++;
      sinceStart = 0;
      await cell.close().catch(() => undefined);
      cell = await startApiCell(o);
      return;
    }
    sinceStart++;
    const noop: Fail = () => undefined;
    const t1 = Date.now();
    for (;;) {
      const list = await openJobs(cell, t, noop);
      const cl = await busyRus(cell, t, noop);
      const open = list ? [...list.values()].filter((s) => !FINAL.has(s.state)) : undefined;
      if (open && open.length === 0 && cl && cl.busy === 0) return;
      if (Date.now() - t1 > 8000 || !open) break;
      for (const s of open) if (!s.cancelRequested) await unary<Job__Output>((op, cb) => cell.client.CancelJob({ jobId: s.id }, op, cb), t.callMs);
      await sleep(200);
    }
    restarts++;
    sinceStart = 0;
    o.onProgress?.(`${o.kind}: the cell was not idle after a failed run; starting a fresh one`);
    await cell.close().catch(() => undefined);
    cell = await startApiCell(o);
  };

  const prop = fc.asyncProperty(scenarioArb, async (cmds) => {
    const run = (async () => {
      await ensureClean();
      const s = emptyStats();
      const v = await runScenario(cell, cmds, t, s);
      mergeStats(stats, s);
      runs++;
      for (const x of v) {
        bump(violations, x.property);
        examples[x.property] ??= x.message;
      }
      const enforced = v.filter((x) => !o.only || o.only.includes(x.property));
      if (runs % 10 === 0) o.onProgress?.(`${o.kind}: ${runs} scenarios, ${Math.round((Date.now() - t0) / 1000)} s`);
      if (enforced.length > 0) {
        throw new Error(`${enforced.length} violation(s):\n${enforced.map((x) => `  [${x.property}] ${x.message}`).join('\n')}`);
      }
    })();
    inflight = run.catch(() => undefined);
    await run;
  });

  let details: fc.RunDetails<[Cmd[]]>;
  try {
    details = await fc.check<[Cmd[]]>(prop, {
      numRuns: o.numRuns,
      examples: o.examples === false ? [] : EXAMPLE_SCENARIOS.map((s) => [s] as [Cmd[]]),
      plugins: [fc.interruptAfterTimeLimit(o.timeLimitMs) as fc.Plugin<[Cmd[]]>],
      ...(o.seed !== undefined ? { seed: o.seed } : {}),
      ...(o.path !== undefined ? { path: o.path } : {}),
    });
    // An interrupted predicate keeps running: let it finish before the cell goes away.
    await inflight;
  } finally {
    await inflight;
  }
  const health = await healthCheck(cell.address);
  await cell.close();
  const err = details.errorInstance instanceof Error ? details.errorInstance.message : details.errorInstance ? JSON.stringify(details.errorInstance) : '';
  const report = details.failed
    ? `${fc.defaultReportMessage(details) ?? 'failed'}${err && !(fc.defaultReportMessage(details) ?? '').includes(err) ? `\n${err}` : ''}`
    : '';
  return {
    kind: o.kind,
    ok: !details.failed,
    report,
    numRuns: details.numRuns,
    numShrinks: details.numShrinks,
    interrupted: details.interrupted,
    seed: details.seed,
    elapsedMs: Date.now() - t0,
    stats,
    violations,
    examples,
    cellRestarts: restarts,
    cellRecycles: recycles,
    health,
    error: err,
  };
}

/** A few lines for logs and the bench summary. */
export function summarize(r: PropertyResult): string {
  const s = r.stats;
  const codes = Object.entries(s.codes)
    .sort()
    .map(([k, v]) => `${k}: ${v}`)
    .join(', ');
  const v = Object.entries(r.violations)
    .map(([k, n]) => `${k} ×${n}`)
    .join(', ');
  return [
    `${r.kind}: ${r.ok ? 'passed' : 'FAILED'} — ${r.numRuns} scenarios${r.interrupted ? ' (time limit)' : ''}, ${r.numShrinks} shrinks, seed ${r.seed}, ${(r.elapsedMs / 1000).toFixed(1)} s, cell restarts ${r.cellRestarts}${r.cellRecycles > 0 ? ` (+${r.cellRecycles} recycled)` : ''}, health ${r.health}`,
    `  accepted ${s.accepted} jobs (${s.acceptedTasks} tasks, largest ${s.maxTasksAccepted}); final states ${JSON.stringify(s.finalStates)}; at the end ${s.waitingAtEnd} waiting, ${s.workingAtEnd} working, ${s.cancelledAtEnd} cancelled; ${s.watchEvents} watch events`,
    `  answers: ${codes}`,
    `  violations: ${v || 'none'}`,
  ].join('\n');
}
