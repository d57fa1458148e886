/**
 * The client against a front-end of a large cell: GetCluster lists every server with its RUs, an
 * answer larger than gRPC's default 4 MiB limit for what a client receives (a 10,000 × 16 cell
 * half busy answers 4.7 MB; this one, 20,000 × 16 and all free, 5.7 MB), and `tarcil cluster`
 * (and `--servers`) still answer. The cell is seeded into the embedded store.
 */
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EXIT } from '../../src/cli/exit-codes.ts';
import { startScheduler, type SchedulerProcess } from '../../src/frontend/runtime.ts';
import { loadCatalog } from '../../src/model/catalog.ts';
import { Keys } from '../../src/state/keys.ts';
import { seedCluster, uniformServers } from '../../src/state/seed.ts';
import { MemoryStore } from '../../src/store/index.ts';
import { SystemClock } from '../../src/util/clock.ts';
import { createLogger } from '../../src/util/log.ts';
import { SeededRng } from '../../src/util/rng.ts';

const BIN = fileURLToPath(new URL('../../src/cli/bin.js', import.meta.url));
const SERVERS = 20_000;

function run(args: string[]): Promise<{ code: number | null; out: string; err: string }> {
  const child = spawn(process.execPath, [BIN, ...args], { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, TARCIL_LOG: 'silent' } });
  let out = '';
  let err = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr.on('data', (d: Buffer) => (err += d.toString()));
  return new Promise((resolve) => child.on('close', (code) => resolve({ code, out, err })));
}

describe('tarcil cluster on a 20,000-server cell', () => {
  const store = new MemoryStore();
  let sched: SchedulerProcess | undefined;
  let server = '';

  beforeAll(async () => {
    const keys = new Keys('/large/');
    await seedCluster(store, keys, uniformServers(SERVERS, 16));
    sched = await startScheduler({
      name: 'large',
      store,
      keys,
      catalog: loadCatalog(),
      clock: new SystemClock(),
      rng: new SeededRng(1),
      log: createLogger('test', 'silent'),
      agents: 1,
      host: '127.0.0.1',
      port: 0,
    });
    await sched.ready;
    server = `127.0.0.1:${sched.port}`;
  }, 120_000);

  afterAll(async () => {
    await sched?.close();
    await store.close();
  });

  it('answers with every server, though the answer is larger than 4 MiB', async () => {
    const doc = await run(['cluster', '-o', 'json', '--server', server]);
    expect(doc.err).toBe('');
    expect(doc.code).toBe(EXIT.OK);
    expect(doc.out.length).toBeGreaterThan(4 * 2 ** 20);
    const cl = JSON.parse(doc.out) as { servers: { id: string }[] };
    expect(cl.servers).toHaveLength(SERVERS);

    const summary = await run(['cluster', '--server', server]);
    expect(summary.err).toBe('');
    expect(summary.code).toBe(EXIT.OK);
    expect(summary.out).toMatch(/20,?000/);

    const listed = await run(['cluster', '--servers', '--limit', '3', '--server', server]);
    expect(listed.code).toBe(EXIT.OK);
    expect(listed.out).toContain('s0000');
  }, 120_000);
});
