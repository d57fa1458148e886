/**
 * The processes of a live hollow cell on etcd, as the soak starts them: one `tarcil hollow`
 * process running the cell's nodes and `tarcil server` front-ends, each a child process whose
 * output is kept.
 */
import { schedulerClient } from '../../src/cli/grpc-clients.ts';
import type { SchedulerClient } from '../../src/rpc/gen/tarcil/v1/Scheduler.ts';
import { tarcil, type TarcilProc } from '../../test/support/procs.ts';

export interface LiveFrontEnd {
  proc: TarcilProc;
  port: number;
  metricsPort: number;
  client: SchedulerClient;
}

export interface FrontEndOptions {
  /** etcd://host:port */
  url: string;
  prefix: string;
  agents: number;
  name: string;
  retain: string;
  compactMargin: string;
  /** More `tarcil server` flags, as given. */
  extra?: string[];
  /** Environment added to the process's. */
  env?: Record<string, string>;
}

/** Starts a `tarcil server` on free ports and resolves once it listens. */
export async function startFrontEnd(o: FrontEndOptions, onChild: (p: TarcilProc) => void = () => undefined): Promise<LiveFrontEnd> {
  const proc = tarcil(
    [
      'server',
      '--store',
      o.url,
      '--prefix',
      o.prefix,
      '--agents',
      String(o.agents),
      '--port',
      '0',
      '--metrics-port',
      '0',
      '--retain',
      o.retain,
      '--compact-margin',
      o.compactMargin,
      '--name',
      o.name,
      ...(o.extra ?? []),
    ],
    o.env,
  );
  onChild(proc);
  const m = await proc.waitFor(/listening on [^:]+:(\d+), metrics on :(\d+)/, 120_000);
  const port = Number(m[1]);
  return { proc, port, metricsPort: Number(m[2]), client: schedulerClient(`127.0.0.1:${port}`) };
}

export interface HollowOptions {
  url: string;
  prefix: string;
  /** A catalog cluster's name or a cluster file. */
  cluster: string;
  /** Scale the cluster to this many servers (`--servers`); absent: as it is. */
  servers?: number;
  disconnectGrace: string;
  extra?: string[];
  env?: Record<string, string>;
}

export interface LiveHollow {
  proc: TarcilProc;
  nodes: number;
  totalRus: number;
  metricsPort: number;
}

/** Starts `tarcil hollow` and resolves once all its nodes are registered. */
export async function startHollowCell(o: HollowOptions, onChild: (p: TarcilProc) => void = () => undefined): Promise<LiveHollow> {
  const proc = tarcil(
    [
      'hollow',
      '--store',
      o.url,
      '--prefix',
      o.prefix,
      ...(o.servers !== undefined ? ['--servers', String(o.servers)] : []),
      '--cluster',
      o.cluster,
      '--lease-ttl',
      '10',
      '--disconnect-grace',
      o.disconnectGrace,
      '--metrics-port',
      '0',
      ...(o.extra ?? []),
    ],
    o.env,
  );
  onChild(proc);
  const ready = await proc.waitFor(/tarcil hollow: (\d+) nodes .*?, (\d+) RUs.*metrics on :(\d+)/, 600_000);
  return { proc, nodes: Number(ready[1]), totalRus: Number(ready[2]), metricsPort: Number(ready[3]) };
}
