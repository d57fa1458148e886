/**
 * The commands of the live cluster (up, server, monitor, hollow) and the client commands, with their
 * flags.
 */
import { type Command, InvalidArgumentError, Option } from 'commander';
import { DEFAULT_AGENT_CONFIG } from '../agent/agent.ts';
import { AGENT_OPTION_NAMES } from '../agent/config.ts';
import { DEFAULT_LEASE_TTL_S } from '../state/lease.ts';
import { DEFAULT_DISCONNECT_GRACE_MS } from '../monitor/options.ts';
import { DEFAULT_COMPACT_MARGIN_MS } from '../state/housekeeping.ts';
import { DEFAULT_RETAIN_MS, REQUEST_RETAIN_FLOOR_MS } from '../state/retention.ts';
import {
  cancelCommand,
  clusterCommand,
  DEFAULT_SERVER,
  explainCommand,
  jobsCommand,
  monitorCommand,
  serverCommand,
  statusCommand,
  submitCommand,
  upCommand,
} from './live.ts';
import { hollowCommand } from './hollow.ts';

const int = (name: string, min: number, max: number) => (v: string): number => {
  const x = Number(v);
  if (v.trim() === '' || !Number.isInteger(x) || x < min || x > max) throw new InvalidArgumentError(`${name} must be an integer in [${min}, ${max}] (got '${v}')`);
  return x;
};
const fraction = (name: string) => (v: string): number => {
  const x = Number(v);
  if (v.trim() === '' || !Number.isFinite(x) || x <= 0 || x > 1) throw new InvalidArgumentError(`${name} must be a number in (0, 1] (got '${v}')`);
  return x;
};
const collect = (v: string, prev: string[] = []): string[] => [...prev, v];
const UNIT_MS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, min: 60_000, h: 3_600_000 };
const fmtMs = (ms: number): string => (ms % 3_600_000 === 0 ? `${ms / 3_600_000}h` : ms % 60_000 === 0 ? `${ms / 60_000}m` : ms % 1000 === 0 ? `${ms / 1000}s` : `${ms}ms`);
/**
 * A duration in milliseconds from `1500ms`, `90s`, `30m`, `1h` or a bare number of seconds, within
 * [minMs, maxMs]; with `off`, the words off and 0 give 0.
 */
const duration = (name: string, maxMs: number, opts: { minMs?: number; off?: boolean } = {}) => (v: string): number => {
  if (opts.off && /^\s*(off|0)\s*$/i.test(v)) return 0;
  const m = /^\s*(\d+(?:\.\d+)?)\s*(ms|s|min|m|h)?\s*$/.exec(v);
  const ms = m ? Math.round(Number(m[1]) * (UNIT_MS[m[2] ?? 's'] ?? NaN)) : NaN;
  const min = opts.minMs ?? 0;
  if (!Number.isFinite(ms) || ms > maxMs || ms < min) {
    const range = `${min > 0 ? `at least ${fmtMs(min)}, ` : ''}at most ${fmtMs(maxMs)}${opts.off ? ', or off' : ''}`;
    throw new InvalidArgumentError(`${name} must be a duration such as 1500ms, 90s, 30m or 1h (a bare number is seconds), ${range} (got '${v}')`);
  }
  return ms;
};
const out = (l: string): void => {
  process.stdout.write(`${l}\n`);
};

function storeOptions(c: Command, dflt: string): Command {
  return c
    .addOption(new Option('--store <url>', 'memory:// (embedded, one process), etcd://h1:2379[,h2:2379] or etcds://… (TLS)').default(dflt))
    .option('--prefix <p>', 'key prefix in the store (several clusters may share one etcd)', '/tarcil/default/')
    .option('--etcd-ca <file>', 'etcds://: CA bundle of the etcd servers')
    .option('--etcd-cert <file>', 'etcds://: client certificate')
    .option('--etcd-key <file>', 'etcds://: client key');
}

function tlsOptions(c: Command): Command {
  return c
    .option('--tls-cert <file>', 'serve gRPC over TLS with this certificate')
    .option('--tls-key <file>', 'and this key')
    .option('--tls-ca <file>', 'require client certificates signed by this CA');
}

/** Retention and compaction: on `server` and `up` (the elected front-end applies them). */
function housekeepingOptions(c: Command): Command {
  return c
    .addOption(
      new Option(
        '--retain <duration>',
        `finished jobs, their tasks and decision records are deleted this long after they end (e.g. 20s, 30m, 1h); request ids live as long as their job and at least max(--retain, ${REQUEST_RETAIN_FLOOR_MS / 60_000}m) after the request`,
      )
        .argParser(duration('--retain', 30 * 86_400_000, { minMs: 1000 }))
        .default(DEFAULT_RETAIN_MS, fmtMs(DEFAULT_RETAIN_MS)),
    )
    .addOption(
      new Option(
        '--compact-margin <duration>',
        "the elected front-end compacts the store's history to the revision of this long ago (watchers further behind re-list); off: leave compaction to etcd's --auto-compaction-*",
      )
        .argParser(duration('--compact-margin', 86_400_000, { minMs: 10_000, off: true }))
        .default(DEFAULT_COMPACT_MARGIN_MS, fmtMs(DEFAULT_COMPACT_MARGIN_MS)),
    );
}

function clientOptions(c: Command): Command {
  return c
    .option('--server <host:port>', 'the tarcil front-end', process.env.TARCIL_SERVER ?? DEFAULT_SERVER)
    .option('--tls-ca <file>', 'connect over TLS, trusting this CA')
    .option('--timeout <ms>', 'deadline of each call', int('--timeout', 1, 3_600_000), 10_000);
}

/** The live cluster's commands: server, monitor, hollow, up, and the client commands. */
export function registerLiveCommands(program: Command): void {
  const up = program
    .command('up')
    .description('a whole cluster in one process: the demo cluster\'s monitors, N agents and the gRPC front-end (what `npm start` runs)');
  housekeepingOptions(storeOptions(tlsOptions(up), 'memory://'))
    .option('--cluster <name|file>', 'cluster spec from profiles/clusters or a file', 'demo')
    .option('--agents <n>', 'scheduling agents', int('--agents', 1, 64), 3)
    .option('--host <host>', 'interface to listen on', '127.0.0.1')
    .option('--port <n>', 'Scheduler gRPC port', int('--port', 0, 65535), 7070)
    .option('--metrics-port <n>', 'Prometheus /metrics port', int('--metrics-port', 0, 65535), 9464)
    .addOption(new Option('--executor <kind>', 'how tasks run').choices(['simulated', 'process']).default('simulated'))
    .option('--log-dir <dir>', 'process executor: per-task stdout/stderr', 'tarcil-logs')
    .action(async (o: Parameters<typeof upCommand>[0]) => upCommand(o));

  const server = program.command('server').description('a front-end with N scheduling agents; several may share one etcd');
  housekeepingOptions(storeOptions(tlsOptions(server), 'memory://'))
    .option('--agents <n>', 'scheduling agents in this process', int('--agents', 1, 64), 2)
    .option('--host <host>', 'interface to listen on', '127.0.0.1')
    .option('--port <n>', 'Scheduler gRPC port (0: any free port)', int('--port', 0, 65535), 7070)
    .option('--metrics-port <n>', 'Prometheus /metrics port (off unless given)', int('--metrics-port', 0, 65535))
    .option('--lease-ttl <s>', 'TTL of the lease binding this process\'s job ownership', int('--lease-ttl', 1, 600), DEFAULT_LEASE_TTL_S)
    .option('--name <name>', 'names this process in owner records (default host-pid)')
    .addOption(new Option('--scope <scope>', 'conflict scope of commits').choices(['ru', 'server']).default('ru'))
    .option('--group-commit <n>', 'commit requests each agent keeps in flight; decisions made meanwhile leave together (0: one transaction per decision)', int('--group-commit', 0, 64), DEFAULT_AGENT_CONFIG.groupCommit)
    .option('--monitor-ca <file>', 'monitors serve TLS: trust this CA (and present --tls-cert/--tls-key to them)')
    .option('--agent <key=value>', `an agent option, repeatable (${AGENT_OPTION_NAMES.join(', ')}; e.g. failProb=0.001, capR=64, admission=false)`, collect, [])
    .action(async (o: Parameters<typeof serverCommand>[0]) => serverCommand(o));

  const monitor = program.command('monitor').description('the local monitor of one node: registers it, runs its tasks, watches their rates');
  storeOptions(tlsOptions(monitor), 'memory://')
    .requiredOption('--server <id>', 'this node\'s server id')
    .requiredOption('--platform <type>', 'platform from profiles/platforms.json')
    .option('--rus <n>', 'resource units (default: the platform\'s cores)', int('--rus', 1, 4096))
    .option('--rack <rack>', 'rack name', 'r000')
    .option('--attr <key=value>', 'server attribute (repeatable)', collect, [])
    .addOption(new Option('--executor <kind>', 'how tasks run').choices(['simulated', 'process']).default('simulated'))
    .option('--host <host>', 'interface for the NodeMonitor service', '127.0.0.1')
    .option('--port <n>', 'NodeMonitor port (0: any free port)', int('--port', 0, 65535), 0)
    .option('--advertise <host:port>', 'address agents use to reach this monitor')
    .option('--lease-ttl <s>', 'TTL of the node\'s registration lease', int('--lease-ttl', 1, 600), DEFAULT_LEASE_TTL_S)
    .option('--log-dir <dir>', 'process executor: per-task stdout/stderr', 'tarcil-logs')
    .option('--journal-dir <dir>', 'where each task\'s outcome is written (fsync\'d) the moment it ends, until etcd has it (default: <log-dir>/journal)')
    .addOption(
      new Option(
        '--disconnect-grace <ms or s>',
        'without etcd, tasks keep running until this long after the lease could have expired, then are killed: longer rides out longer outages, but delays re-placing the tasks of a node that really died (e.g. 90s, 1500ms)',
      )
        .argParser(duration('--disconnect-grace', 86_400_000))
        .default(DEFAULT_DISCONNECT_GRACE_MS, `${DEFAULT_DISCONNECT_GRACE_MS / 1000}s`),
    )
    .option('--metrics-port <n>', 'Prometheus /metrics port (off unless given)', int('--metrics-port', 0, 65535))
    .option('--cpu-rate', 'process executor: judge task rates by CPU time per wall time (for CPU-bound work)', false)
    .action(async (o: Parameters<typeof monitorCommand>[0]) => monitorCommand(o));

  const hollow = program
    .command('hollow')
    .description('many simulated nodes in one process (hollow nodes): each registers, runs and reports as a node monitor does; one NodeMonitor endpoint for all');
  storeOptions(tlsOptions(hollow), 'etcd://127.0.0.1:2379')
    .option('--cluster <name|file>', 'cluster spec from profiles/clusters or a file: platforms, racks and attributes of the nodes', 'hollow-10k')
    .option('--servers <n>', "this many nodes: the spec's groups scaled in proportion (default: the spec's own count)", int('--servers', 1, 1_000_000))
    .option('--host <host>', 'interface for the NodeMonitor service', '127.0.0.1')
    .option('--port <n>', 'NodeMonitor port (0: any free port)', int('--port', 0, 65535), 0)
    .option('--advertise <host:port>', 'address front-ends use to reach the NodeMonitor service')
    .option('--lease-ttl <s>', 'TTL of the one lease every node of this process registers under', int('--lease-ttl', 1, 600), DEFAULT_LEASE_TTL_S)
    .addOption(
      new Option('--disconnect-grace <ms or s>', 'as for tarcil monitor: how long tasks outlive a lost lease, and how long owners wait for a dropped node')
        .argParser(duration('--disconnect-grace', 86_400_000))
        .default(DEFAULT_DISCONNECT_GRACE_MS, `${DEFAULT_DISCONNECT_GRACE_MS / 1000}s`),
    )
    .option('--kill-fraction <f>', 'share of the live nodes each SIGUSR2 (or --kill-after) drops, as if their machines died', fraction('--kill-fraction'), 0.05)
    .option('--kill-after <ms or s>', 'drop --kill-fraction of the nodes once, this long after they registered', duration('--kill-after', 86_400_000))
    .option('--seed <n>', 'seed of the choice of nodes to drop', int('--seed', 0, 2 ** 31 - 1), 1)
    .option('--metrics-port <n>', 'Prometheus /metrics port (off unless given)', int('--metrics-port', 0, 65535))
    .action(async (o: Parameters<typeof hollowCommand>[0]) => hollowCommand(o));

  clientOptions(program.command('submit <spec.json>').description('submit a job spec (see profiles/jobs/)'))
    .option('--wait', 'follow the job until it ends (exit code 0 if it succeeded)', false)
    .option('--request-id <id>', 'idempotency key (default: a new UUID); a retry with the same key returns the same job')
    .option('--retries <n>', 'tries again this many times when the server is unavailable or the deadline passes', int('--retries', 0, 100), 5)
    .action(async (file: string, o: Parameters<typeof submitCommand>[1]) => {
      process.exitCode = await submitCommand(file, o, out);
    });
  clientOptions(program.command('status <job-id>').description('a job and its tasks'))
    .option('--json', 'machine-readable output', false)
    .action(async (id: string, o: Parameters<typeof statusCommand>[1]) => statusCommand(id, o, out));
  clientOptions(program.command('jobs').description('list jobs, newest first'))
    .option('--state <state>', 'only jobs in this state (repeatable)', collect)
    .option('--limit <n>', 'at most this many', int('--limit', 0, 1_000_000), 50)
    .action(async (o: Parameters<typeof jobsCommand>[0]) => jobsCommand(o, out));
  clientOptions(program.command('cluster').description('servers and RUs: free, busy, down; admission buckets'))
    .option('--json', 'machine-readable output', false)
    .action(async (o: Parameters<typeof clusterCommand>[0]) => clusterCommand(o, out));
  clientOptions(program.command('explain <job-id>').description('why a job waits, or where it went and why'))
    .option('--json', 'machine-readable output', false)
    .action(async (id: string, o: Parameters<typeof explainCommand>[1]) => explainCommand(id, o, out));
  clientOptions(program.command('cancel <job-id>').description('cancel a job: queued tasks are dropped, running ones killed'))
    .action(async (id: string, o: Parameters<typeof cancelCommand>[1]) => cancelCommand(id, o, out));
}
