/**
 * `tarcil hollow`: many simulated nodes in one process (hollow nodes) that register, run and
 * report exactly as node monitors do, from a cluster spec scaled to --servers; SIGUSR2 (or
 * --kill-after) drops --kill-fraction of them as if their machines died.
 */
import { expandCluster, loadCatalog, resolveCluster, scaleCluster } from '../model/catalog.ts';
import type { ServerSpec } from '../model/types.ts';
import { Keys } from '../state/keys.ts';
import { startHollow, simulateDeaths } from '../node/hollow.ts';
import { SystemClock } from '../util/clock.ts';
import { invalid, isTarcilError } from '../util/errors.ts';
import { createLogger, type Logger } from '../util/log.ts';
import { installFaultPolicy } from '../util/faults.ts';
import { SeededRng } from '../util/rng.ts';
import { holdOpen, openDaemonStore, runUntilSignal, serverTls, startFailure, type LogFlags, type StoreFlags, type TlsFlags } from './live.ts';

export interface HollowFlags extends StoreFlags, TlsFlags, LogFlags {
  cluster: string;
  servers?: number;
  host: string;
  port: number;
  advertise?: string;
  leaseTtl: number;
  disconnectGrace: number;
  killFraction: number;
  killAfter?: number;
  seed: number;
  metricsPort?: number;
  maxWrites?: number;
  /** --block / --no-block: every node's blocks of its server (default DEFAULT_RUNTIME.block). */
  block: boolean;
}

export async function hollowCommand(o: HollowFlags): Promise<void> {
  if (!/^etcds?:\/\//.test(o.store))
    throw invalid('--store', `must be etcd://… or etcds://…: hollow nodes serve front-ends in other processes (got '${o.store}')`);
  const catalog = loadCatalog();
  let servers;
  try {
    const spec = resolveCluster(o.cluster, catalog);
    servers = expandCluster(o.servers !== undefined ? scaleCluster(spec, o.servers) : spec, catalog.platforms);
  } catch (err) {
    if (isTarcilError(err)) throw invalid('--cluster', err.message.replace(/^cluster: /, ''));
    throw err;
  }
  const log = createLogger('tarcil-hollow', o.logLevel);
  const release = holdOpen();
  try {
    await runHollow(o, log, servers);
  } catch (err) {
    throw startFailure('hollow', err);
  } finally {
    release();
  }
}

async function runHollow(o: HollowFlags, log: Logger, servers: ServerSpec[]): Promise<void> {
  const store = await openDaemonStore('hollow', o);
  installFaultPolicy(log, { who: 'hollow', embedded: o.store.startsWith('memory:') });
  const tls = serverTls(o);
  const t0 = Date.now();
  const h = await startHollow({
    store,
    keys: new Keys(o.prefix),
    clock: new SystemClock(),
    log,
    servers,
    host: o.host,
    port: o.port,
    ...(o.advertise ? { advertise: o.advertise } : {}),
    ...(tls ? { tls } : {}),
    leaseTtlSeconds: o.leaseTtl,
    disconnectGraceMs: o.disconnectGrace,
    block: o.block,
    rng: new SeededRng(o.seed),
    ...(o.metricsPort !== undefined ? { metricsPort: o.metricsPort } : {}),
    ...(o.maxWrites !== undefined ? { maxWrites: o.maxWrites } : {}),
  });
  const rus = servers.reduce((n, s) => n + s.rus, 0);
  const platforms = new Set(servers.map((s) => s.platform)).size;
  const out = (l: string): boolean => process.stdout.write(`${l}\n`);
  const banner = (): void => {
    out(
      `tarcil hollow: ${servers.length} nodes (cluster ${o.cluster}, ${platforms} platform(s), ${rus} RUs, simulated executor) registered in ${((Date.now() - t0) / 1000).toFixed(1)} s; ` +
        `NodeMonitor on ${o.host}:${h.port}${h.metricsPort !== undefined ? `, metrics on :${h.metricsPort}/metrics` : ''}; pid ${process.pid}`,
    );
    out(
      `  kill -USR2 ${process.pid} drops ${o.killFraction * 100}% of the live nodes${o.killAfter !== undefined ? ` (once by itself after ${o.killAfter / 1000} s)` : ''}`,
    );
  };
  const stop = simulateDeaths(h, log, {
    fraction: o.killFraction,
    ...(o.killAfter !== undefined ? { afterMs: o.killAfter } : {}),
    onKilled: (ids) =>
      out(`dropped ${ids.length} hollow node(s): ${ids.slice(0, 10).join(' ')}${ids.length > 10 ? ' …' : ''}; ${h.hollow.snapshot().live} live`),
  });
  await runUntilSignal(
    log,
    async () => {
      stop();
      await h.close();
      await store.close();
    },
    banner,
  );
}
