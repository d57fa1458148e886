/**
 * Process wiring of `tarcil hollow`: many hollow nodes (src/monitor/hollow.ts) behind one
 * NodeMonitor gRPC service routed by server id, their /metrics, and the ways a node's death is
 * simulated from outside (a signal, a timer).
 */
import type { ServerSpec } from '../model/types.ts';
import { HollowNodes, type HollowOptions } from '../monitor/hollow.ts';
import { checkMonitorOptions } from '../monitor/options.ts';
import type { Keys } from '../state/keys.ts';
import type { ClusterStore } from '../store/types.ts';
import type { Clock } from '../util/clock.ts';
import { errorMessage } from '../util/errors.ts';
import type { Logger } from '../util/log.ts';
import { startGrpcServer, type TlsFiles } from '../rpc/grpc.ts';
import { HollowMetrics } from './metrics.ts';
import { addNodeMonitorService, hollowNodes } from './monitor-service.ts';

export interface HollowProcessOptions {
  store: ClusterStore;
  keys: Keys;
  clock: Clock;
  log: Logger;
  servers: readonly ServerSpec[];
  host: string;
  port: number;
  /** Address front-ends use to reach the NodeMonitor service (default host:boundPort). */
  advertise?: string;
  tls?: TlsFiles;
  leaseTtlSeconds?: number;
  disconnectGraceMs?: number;
  loadThreshold?: number;
  /** Blocks of slow servers, for every node (HollowOptions.block; default DEFAULT_RUNTIME.block). */
  block?: boolean;
  rng?: HollowOptions['rng'];
  /** Task-start writes of all nodes in flight at once (HollowOptions.maxWrites). */
  maxWrites?: number;
  /** Serve Prometheus metrics on this port (undefined: no endpoint; 0: any free port). */
  metricsPort?: number;
}

export interface HollowProcess {
  port: number;
  metricsPort: number | undefined;
  hollow: HollowNodes;
  close(): Promise<void>;
}

/** Starts the NodeMonitor service, then registers every hollow node and follows the cell. */
export async function startHollow(o: HollowProcessOptions): Promise<HollowProcess> {
  checkMonitorOptions(o);
  const hollow = new HollowNodes({
    store: o.store,
    keys: o.keys,
    clock: o.clock,
    log: o.log.child({ component: 'hollow' }),
    servers: o.servers,
    ...(o.leaseTtlSeconds !== undefined ? { leaseTtlSeconds: o.leaseTtlSeconds } : {}),
    ...(o.disconnectGraceMs !== undefined ? { disconnectGraceMs: o.disconnectGraceMs } : {}),
    ...(o.loadThreshold !== undefined ? { loadThreshold: o.loadThreshold } : {}),
    ...(o.block !== undefined ? { block: o.block } : {}),
    ...(o.rng ? { rng: o.rng } : {}),
    ...(o.maxWrites !== undefined ? { maxWrites: o.maxWrites } : {}),
  });
  const grpcServer = await startGrpcServer({
    log: o.log,
    host: o.host,
    port: o.port,
    ...(o.tls ? { tls: o.tls } : {}),
    register: (server) => [addNodeMonitorService(server, hollowNodes(hollow))],
  });
  const metrics = o.metricsPort !== undefined ? new HollowMetrics(hollow, o.store, o.keys) : undefined;
  try {
    await hollow.setEndpoint(o.advertise ?? `${o.host === '0.0.0.0' ? '127.0.0.1' : o.host}:${grpcServer.port}`);
    await hollow.start();
  } catch (err) {
    await grpcServer.close(500);
    throw err;
  }
  const metricsPort = metrics && o.metricsPort !== undefined ? await metrics.listen(o.host, o.metricsPort) : undefined;
  return {
    port: grpcServer.port,
    metricsPort,
    hollow,
    close: async () => {
      await hollow.close();
      await grpcServer.close(500);
      await metrics?.close();
    },
  };
}

/**
 * Drops `fraction` of the live nodes on every `signal` (SIGUSR2 by default), and once after
 * `afterMs` if given. Returns a function that stops listening.
 */
export function simulateDeaths(
  h: HollowProcess,
  log: Logger,
  o: { fraction: number; signal?: NodeJS.Signals; afterMs?: number; onKilled?: (ids: string[]) => void },
): () => void {
  const drop = (why: string): void => {
    h.hollow.kill({ fraction: o.fraction }).then(
      (ids) => {
        log.warn({ why, dropped: ids.length, fraction: o.fraction }, 'hollow nodes dropped');
        o.onKilled?.(ids);
      },
      (err: unknown) => log.error({ err: errorMessage(err) }, 'dropping hollow nodes failed'),
    );
  };
  const signal = o.signal ?? 'SIGUSR2';
  const onSignal = (): void => drop(signal);
  process.on(signal, onSignal);
  const timer = o.afterMs !== undefined ? setTimeout(() => drop(`--kill-after ${o.afterMs} ms`), o.afterMs) : undefined;
  return () => {
    process.off(signal, onSignal);
    if (timer) clearTimeout(timer);
  };
}
