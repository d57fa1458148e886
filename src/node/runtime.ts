/**
 * Process wiring of a node: its LocalMonitor, executor and NodeMonitor service, as `tarcil
 * monitor` and `up` start them (startMonitor). The front-end's is frontend/runtime.ts.
 */
import type { SlowdownModel } from '../monitor/load.ts';
import type { ServerSpec } from '../model/types.ts';
import { ProcessExecutor, SimulatedExecutor, type Executor } from '../monitor/executor.ts';
import { LocalMonitor } from '../monitor/monitor.ts';
import { checkMonitorOptions, DEFAULT_LOG_DIR } from '../monitor/options.ts';
import type { Keys } from '../state/keys.ts';
import type { ClusterStore } from '../store/types.ts';
import type { Clock } from '../util/clock.ts';
import type { Logger } from '../util/log.ts';
import { startGrpcServer, type TlsFiles } from '../rpc/grpc.ts';
import { MonitorMetrics } from './metrics.ts';
import { addNodeMonitorService, localNodes, singleNode } from './monitor-service.ts';

/** The monitors started in this process: a front-end of the same process (`tarcil up`) exports their metrics. */
export const localMonitors = new Set<LocalMonitor>();

export interface MonitorProcessOptions {
  store: ClusterStore;
  keys: Keys;
  clock: Clock;
  log: Logger;
  server: ServerSpec;
  executor: 'simulated' | 'process';
  host: string;
  port: number;
  /** Address others use to reach this monitor (default host:boundPort). */
  advertise?: string;
  leaseTtlSeconds?: number;
  logDir?: string;
  tls?: TlsFiles;
  /** The simulated executor's slowdown model (default: the shared performance model, model/perf.ts). */
  slowdown?: SlowdownModel;
  loadThreshold?: number;
  /** Blocks of this server while a task runs slow (MonitorOptions.block; default DEFAULT_RUNTIME.block, `--block`/`--no-block`). */
  block?: boolean;
  /** Serve Prometheus metrics on this port (undefined: no endpoint; 0: any free port). */
  metricsPort?: number;
  /** Process executor: measure each task's rate from its CPU time (see ProcessExecutor). */
  cpuRate?: boolean;
  /** Where the monitor journals task outcomes (default: `<logDir>/journal` for the process executor). */
  journalDir?: string;
  /** How long tasks keep running once the store cannot be reached and the lease ran out (default DEFAULT_DISCONNECT_GRACE_MS). */
  disconnectGraceMs?: number;
}

export interface MonitorProcess {
  port: number;
  metricsPort: number | undefined;
  monitor: LocalMonitor;
  close(): Promise<void>;
}

/** A node: its LocalMonitor and the NodeMonitor gRPC service. */
export async function startMonitor(o: MonitorProcessOptions): Promise<MonitorProcess> {
  checkMonitorOptions(o);
  const executor: Executor =
    o.executor === 'process'
      ? new ProcessExecutor({ clock: o.clock, logDir: o.logDir ?? DEFAULT_LOG_DIR, ...(o.cpuRate !== undefined ? { cpuRate: o.cpuRate } : {}) })
      : new SimulatedExecutor(o.clock);
  const monitor = new LocalMonitor({
    store: o.store,
    keys: o.keys,
    clock: o.clock,
    log: o.log.child({ component: 'monitor', server: o.server.id }),
    server: o.server,
    executor,
    ...(o.leaseTtlSeconds !== undefined ? { leaseTtlSeconds: o.leaseTtlSeconds } : {}),
    ...(o.loadThreshold !== undefined ? { loadThreshold: o.loadThreshold } : {}),
    ...(o.block !== undefined ? { block: o.block } : {}),
    ...(o.slowdown ? { slowdown: o.slowdown } : {}),
    ...(o.journalDir !== undefined ? { journalDir: o.journalDir } : {}),
    ...(o.disconnectGraceMs !== undefined ? { disconnectGraceMs: o.disconnectGraceMs } : {}),
  });
  const route = singleNode(monitor);
  const grpcServer = await startGrpcServer({
    log: o.log,
    host: o.host,
    port: o.port,
    ...(o.tls ? { tls: o.tls } : {}),
    register: (server) => [addNodeMonitorService(server, route)],
  });
  const advertised = o.advertise ?? `${o.host === '0.0.0.0' ? '127.0.0.1' : o.host}:${grpcServer.port}`;
  const unlisted = localNodes.add(advertised, route);
  try {
    await monitor.setEndpoint(advertised);
    await monitor.start();
  } catch (err) {
    unlisted();
    throw err;
  }
  localMonitors.add(monitor);
  const metrics = o.metricsPort !== undefined ? new MonitorMetrics(monitor, o.store, o.keys) : undefined;
  const metricsPort = metrics && o.metricsPort !== undefined ? await metrics.listen(o.host, o.metricsPort) : undefined;
  return {
    port: grpcServer.port,
    metricsPort,
    monitor,
    close: async () => {
      unlisted();
      localMonitors.delete(monitor);
      await monitor.close();
      if (executor instanceof ProcessExecutor) executor.killAll();
      await grpcServer.close(500);
      await metrics?.close();
    },
  };
}
