/**
 * The commands of the live cluster (up, server, monitor, hollow) and the client commands, with their
 * flags.
 */
import { type Command, InvalidArgumentError, Option } from 'commander';
import { namespaceProblem } from '../tenancy/namespace.ts';
import { AGENT_OPTION_NAMES, DEFAULT_RUNTIME } from '../agent/defaults.ts';
import {
  CLIENT_DEFAULTS,
  DEFAULT_DRAIN_DEADLINE_MS,
  DEFAULT_PORT,
  FRONTEND_LIMITS,
  MAX_DRAIN_DEADLINE_MS,
  SERVER_DEFAULTS,
  UP_DEFAULTS,
} from '../frontend/options.ts';
import {
  DEFAULT_DISCONNECT_GRACE_MS,
  DEFAULT_EXECUTOR,
  DEFAULT_LOG_DIR,
  DEFAULT_MONITOR_PORT,
  DEFAULT_RACK,
  EXECUTOR_KINDS,
  HOLLOW_DEFAULTS,
  MONITOR_LIMITS,
} from '../monitor/options.ts';
import { DEFAULT_LEASE_TTL_S } from '../state/lease.ts';
import type { ProfileUse } from '../state/profiles.ts';
import { REQUEST_RETAIN_FLOOR_MS } from '../state/retention.ts';
import {
  collect,
  duration,
  fmtMs,
  fraction,
  frontEndAddress,
  int,
  intIn,
  LOG_LEVEL_NAMES,
  num,
  SEED_RANGE,
  STORE_RETRY_MS,
  streamLimitOptions,
  SUBMIT_DEADLINE_MS,
} from './flags.ts';
import { EXIT } from './exit-codes.ts';
import type { ClientFlags, ClusterFlags, OutputFlags, SubmitFlags } from './client.ts';
import type { NamespaceFlags } from './namespace-commands.ts';
import { outputFormat } from './output.ts';
import type { HollowFlags } from './hollow.ts';
import type { MonitorFlags, ServerFlags, UpFlags } from './live.ts';
import type { LogsFlags, NodeFlags } from './node-commands.ts';
import { registerAclCommands } from './acl-commands.ts';

const L = FRONTEND_LIMITS;

/** A required option, listed first in the command's help under its own heading. */
const required = (o: Option): Option => o.makeOptionMandatory().helpGroup('Required options:');
const EXECUTORS = [...EXECUTOR_KINDS];
const out = (l: string): void => {
  process.stdout.write(`${l}\n`);
};

function storeOptions(c: Command, dflt: string): Command {
  return c
    .addOption(new Option('--store <url>', 'memory:// (embedded, one process), etcd://h1:2379[,h2:2379] or etcds://… (TLS)').env('TARCIL_STORE').default(dflt))
    .addOption(new Option('--prefix <p>', 'key prefix in the store (several clusters may share one etcd)').env('TARCIL_PREFIX').default(SERVER_DEFAULTS.prefix))
    .option('--etcd-ca <file>', 'etcds://: CA bundle of the etcd servers')
    .option('--etcd-cert <file>', 'etcds://: client certificate')
    .option('--etcd-key <file>', 'etcds://: client key')
    .addOption(
      new Option(
        '--etcd-max-txn-ops <n>',
        "etcd's --max-txn-ops, if it runs with more than its default 128: transactions are sized to it (an agent puts (n - 2) / 3 placements in one)",
      ).argParser(int('--etcd-max-txn-ops', 16, 100_000)),
    )
    .addOption(
      new Option(
        '--wait-for-store [duration]',
        `if the store does not answer at start, say so and try again every ${STORE_RETRY_MS / 1000} s until it does, for at most this long (e.g. 10m; without a value: no limit); without this flag the start stops with the reason (exit code 4)`,
      )
        .preset('forever')
        .argParser(waitForStore),
    );
}

/** `--wait-for-store [duration]`: a duration, or `forever` (the flag without a value). */
function waitForStore(v: string): number {
  return v.trim() === 'forever' ? Infinity : duration('--wait-for-store', { min: 1000, max: 30 * 86_400_000 })(v);
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
        `finished jobs, their tasks and decision records are deleted this long after they end (e.g. 20s, 30m, 1h); request ids live as long as their job and at least max(--retain, ${REQUEST_RETAIN_FLOOR_MS / 60_000}m) after the request; audit records this long after the call`,
      )
        .argParser(duration('--retain', L.retainMs))
        .default(SERVER_DEFAULTS.retainMs, fmtMs(SERVER_DEFAULTS.retainMs)),
    )
    .addOption(
      new Option(
        '--compact-margin <duration>',
        "the elected front-end compacts the store's history to the revision of this long ago (watchers further behind re-list); off: leave compaction to etcd's --auto-compaction-*",
      )
        .argParser(duration('--compact-margin', L.compactMarginMs, { off: true }))
        .default(SERVER_DEFAULTS.compactMarginMs, fmtMs(SERVER_DEFAULTS.compactMarginMs)),
    );
}

/**
 * `--block` / `--no-block` (monitor, hollow, up): the node monitors' blocks, one of the run-time
 * loop's parts, on or off by DEFAULT_RUNTIME.block as in the simulator (bench/README, truths).
 */
function blockOptions(c: Command): Command {
  const on = DEFAULT_RUNTIME.block;
  return c
    .addOption(
      new Option(
        '--block',
        'while a task runs well below its expected rate, its server takes no new placements until the task recovers (or for at most a minute)',
      ).default(on, on ? 'on' : 'off'),
    )
    .addOption(new Option('--no-block', 'never block the server: slow tasks are only reported (moves of jobs that allow them act on the reports)'));
}

/** `--profiles declared|learned`, refused otherwise with the flag and the rule. */
export function profilesFlag(v: string): ProfileUse {
  const t = v.trim();
  if (t === 'declared' || t === 'learned') return t;
  throw new InvalidArgumentError(
    `--profiles must be declared (each job's own profile) or learned (its class's profile as the monitors measured it, once enough tasks were observed) (got '${v}')`,
  );
}

/**
 * `--profiles` (server, up): the job owner's profile book schedules new jobs with the declared or
 * the learned profiles, by default as DEFAULT_RUNTIME.learn says (the simulator's default too).
 */
function profilesOption(c: Command): Command {
  const dflt: ProfileUse = DEFAULT_RUNTIME.learn ? 'learned' : 'declared';
  return c.addOption(
    new Option(
      '--profiles <declared|learned>',
      "new jobs are scheduled with their own (declared) profile, or with their class's as learned from what the monitors measured (observations are kept either way)",
    )
      .argParser(profilesFlag)
      .default(dflt),
  );
}

/** `--log-level`, or $TARCIL_LOG: the daemons' structured log lines. */
export function logOptions(c: Command, dflt: string): Command {
  return c.addOption(new Option('--log-level <level>', 'the lowest level of log line written').choices(LOG_LEVEL_NAMES).env('TARCIL_LOG').default(dflt));
}

function clientOptions(c: Command): Command {
  return c
    .addOption(
      new Option('--server <host[:port]>', `the tarcil front-end (the port defaults to ${DEFAULT_PORT})`)
        .env('TARCIL_SERVER')
        .argParser(frontEndAddress('--server', DEFAULT_PORT))
        .default(CLIENT_DEFAULTS.server),
    )
    .addOption(new Option('--tls-ca <file>', 'connect over TLS, trusting this CA').env('TARCIL_TLS_CA'))
    .addOption(new Option('--tls-cert <file>', 'present this client certificate (mutual TLS; with --tls-key)').env('TARCIL_TLS_CERT'))
    .addOption(new Option('--tls-key <file>', "the client certificate's key").env('TARCIL_TLS_KEY'))
    .addOption(
      new Option('-n, --namespace <name>', 'the namespace of the jobs named or listed (default: default)').env('TARCIL_NAMESPACE').argParser(namespaceFlag),
    )
    .addOption(
      new Option('--token <token>', 'access token, `<accessor>.<secret>` as `tarcil acl` printed it (needed when the front-end has ACLs on)').env(
        'TARCIL_TOKEN',
      ),
    )
    .option('--timeout <ms>', 'deadline of each call', intIn('--timeout', L.timeoutMs), CLIENT_DEFAULTS.timeoutMs);
}

/** `-o, --output` and `-w, --watch`: kubectl's conventions (output.ts, watch.ts). */
function outputOptions(c: Command, watchHelp: string): Command {
  return c
    .addOption(
      new Option('-o, --output <format>', 'json or yaml (the API message in its canonical JSON mapping), or wide (more columns)').argParser(outputFormat),
    )
    .option('-w, --watch', `${watchHelp}; Ctrl-C stops (-o json: one document per line per change)`, false);
}

/** `--interval`: how often --watch asks where the API has no stream. */
function intervalOption(c: Command): Command {
  return c.addOption(
    new Option('--interval <duration>', 'with --watch: how often to ask the front-end again (e.g. 500ms, 2s)')
      .argParser(duration('--interval', { min: 100, max: 3_600_000 }))
      .default(1000, '1s'),
  );
}

/** The live cluster's commands: server, monitor, hollow, up, and the client commands. */
export function registerLiveCommands(program: Command): void {
  program.commandsGroup('Run a cell:');
  const up = program
    .command('up')
    .description("a whole cluster in one process: the demo cluster's monitors, N agents and the gRPC front-end (what `npm start` runs)");
  streamLimitOptions(logOptions(housekeepingOptions(storeOptions(tlsOptions(up), UP_DEFAULTS.store)), 'warn'))
    .option('--cluster <name|file>', 'cluster spec from profiles/clusters or a file', UP_DEFAULTS.cluster)
    .option('--agents <n>', 'scheduling agents', intIn('--agents', L.agents), UP_DEFAULTS.agents)
    .option('--host <host>', 'interface to listen on', UP_DEFAULTS.host)
    .option('--port <n>', 'Scheduler gRPC port', intIn('--port', L.port), UP_DEFAULTS.port)
    .option('--metrics-port <n>', 'Prometheus /metrics port', intIn('--metrics-port', L.port), UP_DEFAULTS.metricsPort)
    .option('--http-port <n>', 'live web dashboard port', intIn('--http-port', L.port), UP_DEFAULTS.httpPort)
    .addOption(new Option('--http-token <token>', 'bearer token the dashboard asks for (needed off loopback without TLS)').env('TARCIL_HTTP_TOKEN'))
    .addOption(new Option('--executor <kind>', 'how tasks run').choices(EXECUTORS).default(UP_DEFAULTS.executor))
    .option('--log-dir <dir>', 'process executor: per-task stdout/stderr', UP_DEFAULTS.logDir)
    .option('--agent <key=value>', `an agent option, repeatable, as for tarcil server (e.g. fairShare=false)`, collect, []);
  profilesOption(blockOptions(up)).action(async (o: UpFlags) => (await import('./live.ts')).upCommand(o));

  const server = program.command('server').description('a front-end with N scheduling agents; several may share one etcd');
  streamLimitOptions(logOptions(housekeepingOptions(storeOptions(tlsOptions(server), SERVER_DEFAULTS.store)), 'info'))
    .option('--agents <n>', 'scheduling agents in this process', intIn('--agents', L.agents), SERVER_DEFAULTS.agents)
    .option('--host <host>', 'interface to listen on', SERVER_DEFAULTS.host)
    .option('--port <n>', 'Scheduler gRPC port (0: any free port)', intIn('--port', L.port), SERVER_DEFAULTS.port)
    .option('--metrics-port <n>', 'Prometheus /metrics port (off unless given)', intIn('--metrics-port', L.port))
    .option('--http-port <n>', 'live web dashboard port (off unless given)', intIn('--http-port', L.port))
    .addOption(new Option('--http-token <token>', 'bearer token the dashboard asks for (needed off loopback without TLS)').env('TARCIL_HTTP_TOKEN'))
    .option(
      '--lease-ttl <s>',
      "TTL of the lease binding this process's job ownership",
      intIn('--lease-ttl', L.leaseTtlSeconds),
      SERVER_DEFAULTS.leaseTtlSeconds,
    )
    .option('--name <name>', 'names this process in owner records (default host-pid)')
    .addOption(new Option('--scope <scope>', 'conflict scope of commits').choices(['ru', 'server']).default(SERVER_DEFAULTS.conflictScope))
    .option(
      '--group-commit <n>',
      'commit requests each agent keeps in flight; decisions made meanwhile leave together (0: one transaction per decision)',
      intIn('--group-commit', L.groupCommit),
      SERVER_DEFAULTS.groupCommit,
    )
    .addOption(
      new Option(
        '--departed-memory <duration>',
        'a server that left still counts as part of the cell this long, so a job it could run waits for it instead of being refused',
      )
        .argParser(duration('--departed-memory', L.departedMemoryMs))
        .default(SERVER_DEFAULTS.departedMemoryMs, fmtMs(SERVER_DEFAULTS.departedMemoryMs)),
    )
    .addOption(
      new Option('--unplaceable-timeout <duration>', 'a job that can run only on servers that are down waits this long, then its unplaced tasks fail')
        .argParser(duration('--unplaceable-timeout', L.unplaceableTimeoutMs))
        .default(SERVER_DEFAULTS.unplaceableTimeoutMs, fmtMs(SERVER_DEFAULTS.unplaceableTimeoutMs)),
    )
    .addOption(
      new Option(
        '--launch-after <duration>',
        "a task its node's monitor has not recorded running this long after its commit is sent to the monitor directly (LaunchTask); monitors follow their RUs in the store and normally start it first (0: send every placement at once)",
      )
        .argParser(duration('--launch-after', L.launchAfterMs))
        .default(SERVER_DEFAULTS.launchAfterMs, fmtMs(SERVER_DEFAULTS.launchAfterMs)),
    )
    .option(
      '--max-pending-tasks <n>',
      'back-pressure: with this many tasks not yet placed, new submissions get RESOURCE_EXHAUSTED (retry later or elsewhere; 0: no limit)',
      intIn('--max-pending-tasks', L.maxPendingTasks),
      SERVER_DEFAULTS.maxPendingTasks,
    )
    .option(
      '--acl',
      'access control: every call needs a token whose policy allows it (`tarcil acl bootstrap` makes the first, an admin token); off: every client may do anything',
      false,
    )
    .option('--monitor-ca <file>', 'monitors serve TLS: trust this CA (and present --tls-cert/--tls-key to them)')
    .option('--agent <key=value>', `an agent option, repeatable (${AGENT_OPTION_NAMES.join(', ')}; e.g. failProb=0.001, capR=64, admission=true)`, collect, []);
  profilesOption(server).action(async (o: ServerFlags) => (await import('./live.ts')).serverCommand(o));

  const monitor = program.command('monitor').description('the local monitor of one node: registers it, runs its tasks, watches their rates');
  monitor
    .addOption(required(new Option('--node <id>', "this node's id (its server id in the cell)")))
    .addOption(required(new Option('--platform <type>', 'platform from profiles/platforms.json')))
    // --server names the front-end on every other command; here it was the node's id.
    .addOption(new Option('--server <id>', 'deprecated: --node').hideHelp().conflicts('node'))
    .on('option:server', (id: string) => {
      process.stderr.write('warning: `tarcil monitor --server <id>` is deprecated, use --node <id> (--server names the front-end on every other command)\n');
      // Recorded as a default, so that commander's conflict check sees only a --node given on
      // the command line (before or after --server) and refuses the pair.
      if (monitor.getOptionValueSource('node') !== 'cli') monitor.setOptionValueWithSource('node', id, 'default');
    });
  logOptions(storeOptions(tlsOptions(monitor), SERVER_DEFAULTS.store), 'info')
    .option('--rus <n>', "resource units (default: the platform's cores)", intIn('--rus', MONITOR_LIMITS.rus))
    .option('--rack <rack>', 'rack name', DEFAULT_RACK)
    .option('--attr <key=value>', 'server attribute (repeatable)', collect, [])
    .addOption(new Option('--executor <kind>', 'how tasks run').choices(EXECUTORS).default(DEFAULT_EXECUTOR))
    .option('--host <host>', 'interface for the NodeMonitor service', SERVER_DEFAULTS.host)
    .option('--port <n>', 'NodeMonitor port (0: any free port)', intIn('--port', L.port), DEFAULT_MONITOR_PORT)
    .option('--advertise <host:port>', 'address agents use to reach this monitor')
    .option('--lease-ttl <s>', "TTL of the node's registration lease", intIn('--lease-ttl', MONITOR_LIMITS.leaseTtlSeconds), DEFAULT_LEASE_TTL_S)
    .option('--log-dir <dir>', 'process executor: per-task stdout/stderr', DEFAULT_LOG_DIR)
    .option('--journal-dir <dir>', "where each task's outcome is written (fsync'd) the moment it ends, until etcd has it (default: <log-dir>/journal)")
    .addOption(
      new Option(
        '--disconnect-grace <ms or s>',
        'without etcd, tasks keep running until this long after the lease could have expired, then are killed: longer rides out longer outages, but delays re-placing the tasks of a node that really died (e.g. 90s, 1500ms)',
      )
        .argParser(duration('--disconnect-grace', MONITOR_LIMITS.disconnectGraceMs))
        .default(DEFAULT_DISCONNECT_GRACE_MS, `${DEFAULT_DISCONNECT_GRACE_MS / 1000}s`),
    )
    .option('--metrics-port <n>', 'Prometheus /metrics port (off unless given)', intIn('--metrics-port', L.port))
    .option('--cpu-rate', 'process executor: judge task rates by CPU time per wall time (for CPU-bound work)', false);
  blockOptions(monitor).action(async (o: MonitorFlags) => (await import('./live.ts')).monitorCommand(o));

  const hollow = program
    .command('hollow')
    .description(
      'many simulated nodes in one process (hollow nodes): each registers, runs and reports as a node monitor does; one NodeMonitor endpoint for all',
    );
  logOptions(storeOptions(tlsOptions(hollow), 'etcd://127.0.0.1:2379'), 'warn')
    .option('--cluster <name|file>', 'cluster spec from profiles/clusters or a file: platforms, racks and attributes of the nodes', HOLLOW_DEFAULTS.cluster)
    .option(
      '--servers <n>',
      "this many nodes: the spec's groups scaled in proportion (default: the spec's own count)",
      intIn('--servers', MONITOR_LIMITS.hollowServers),
    )
    .option('--host <host>', 'interface for the NodeMonitor service', SERVER_DEFAULTS.host)
    .option('--port <n>', 'NodeMonitor port (0: any free port)', intIn('--port', L.port), DEFAULT_MONITOR_PORT)
    .option('--advertise <host:port>', 'address front-ends use to reach the NodeMonitor service')
    .option(
      '--lease-ttl <s>',
      'TTL of the one lease every node of this process registers under',
      intIn('--lease-ttl', MONITOR_LIMITS.leaseTtlSeconds),
      DEFAULT_LEASE_TTL_S,
    )
    .addOption(
      new Option('--disconnect-grace <ms or s>', 'as for tarcil monitor: how long tasks outlive a lost lease, and how long owners wait for a dropped node')
        .argParser(duration('--disconnect-grace', MONITOR_LIMITS.disconnectGraceMs))
        .default(DEFAULT_DISCONNECT_GRACE_MS, `${DEFAULT_DISCONNECT_GRACE_MS / 1000}s`),
    )
    .option(
      '--kill-fraction <f>',
      'share of the live nodes each SIGUSR2 (or --kill-after) drops, as if their machines died',
      fraction('--kill-fraction'),
      HOLLOW_DEFAULTS.killFraction,
    )
    .option('--kill-after <ms or s>', 'drop --kill-fraction of the nodes once, this long after they registered', duration('--kill-after', { max: 86_400_000 }))
    .option('--seed <n>', 'seed of the choice of nodes to drop', intIn('--seed', SEED_RANGE), HOLLOW_DEFAULTS.seed)
    .option('--metrics-port <n>', 'Prometheus /metrics port (off unless given)', intIn('--metrics-port', L.port))
    .option(
      '--max-writes <n>',
      "task-start writes of all nodes in flight at once (default: twice what the process's write requests carry when full)",
      intIn('--max-writes', MONITOR_LIMITS.hollowMaxWrites),
    );
  blockOptions(hollow).action(async (o: HollowFlags) => (await import('./hollow.ts')).hollowCommand(o));

  program.commandsGroup('Use a cell (the client):');
  clientOptions(
    program
      .command('submit')
      .description('submit a job spec (see profiles/jobs/)')
      .argument('<spec.json>', 'the job spec: a JSON file, or - to read it from stdin'),
  )
    .option('--wait', `follow the job until it ends: exit code ${EXIT.OK} if it succeeded, ${EXIT.JOB_FAILED} if it failed or was cancelled`, false)
    .option('--request-id <id>', 'idempotency key (default: a new UUID); a retry with the same key returns the same job')
    .addOption(
      new Option(
        '--deadline <duration>',
        `while the front-end is not reached, unavailable, slow (a call past --timeout) or busy, try the submission again (same request id, so it is stored once) until this long after the first try, then fail (e.g. 30s, 2m; at most ${fmtMs(REQUEST_RETAIN_FLOOR_MS)}; 0: one try)`,
      )
        .argParser(duration('--deadline', { max: REQUEST_RETAIN_FLOOR_MS }))
        .default(SUBMIT_DEADLINE_MS, fmtMs(SUBMIT_DEADLINE_MS)),
    )
    .option('--retries <n>', 'also stop after this many retries (default: as many as --deadline allows)', intIn('--retries', L.submitRetries))
    .action(async (file: string, o: SubmitFlags) => {
      process.exitCode = await (await import('./client.ts')).submitCommand(file, o, out);
    });
  outputOptions(
    clientOptions(program.command('status <job-id>').description('a job and its tasks (a page of at most 1,000)')),
    'the job, then each change (its WatchJob stream) until it ends',
  )
    .option('--json', 'the same as -o json', false)
    .option(
      '--tasks-from <index>',
      'list the tasks from this index on (the page after another: its next_task_from)',
      intIn('--tasks-from', { min: 0, max: 100_000 }),
      0,
    )
    .action(async (id: string, o: ClientFlags & OutputFlags & { tasksFrom?: number }) => (await import('./client.ts')).statusCommand(id, o, out));
  intervalOption(
    outputOptions(clientOptions(program.command('jobs').description('list jobs, newest first')), 'the list, then a row for each job that appears or changes'),
  )
    .option('--state <state>', 'only jobs in this state (repeatable)', collect)
    .option(
      '--limit <n>',
      'at most this many, the newest (0: all); a list cut short says how many matched',
      intIn('--limit', L.listLimit),
      CLIENT_DEFAULTS.listLimit,
    )
    .option('--all', 'every job that matches (the same as --limit 0)', false)
    .option('-A, --all-namespaces', 'the jobs of every namespace', false)
    .action(async (o: ClientFlags & OutputFlags & { state?: string[]; limit: number; all: boolean; allNamespaces: boolean }) =>
      (await import('./client.ts')).jobsCommand(o, out),
    );
  intervalOption(
    outputOptions(
      clientOptions(
        program
          .command('cluster')
          .description(
            'the cell summarised by platform and rack (RUs free, busy, reserved, unschedulable, down; admission buckets); --servers lists the servers',
          ),
      ),
      'the summary (or list), then again whenever it changes',
    ),
  )
    .option('--json', 'the same as -o json', false)
    .option('--servers', 'list the servers (with their RUs) instead of the summary; --platform, --rack, --state filter them, --limit cuts the list', false)
    .option('--platform <type>', 'only servers of this platform (repeatable)', collect)
    .option('--rack <rack>', 'only servers in this rack (repeatable)', collect)
    .option('--state <state>', 'only servers in this state: up, down, blocked, cordoned, draining, drained (repeatable)', collect)
    .option('--limit <n>', 'at most this many servers (0: all); applies to -o json|yaml too', intIn('--limit', { min: 0, max: 10_000_000 }), 0)
    .action(async (o: ClusterFlags) => (await import('./client.ts')).clusterCommand(o, out));
  intervalOption(
    outputOptions(
      clientOptions(program.command('explain <job-id>').description('why a job waits, or where it went and why')),
      'the account, then again whenever it changes, until the job has ended',
    ),
  )
    .option('--json', 'the same as -o json', false)
    .action(async (id: string, o: ClientFlags & OutputFlags) => (await import('./client.ts')).explainCommand(id, o, out));
  clientOptions(program.command('cancel <job-id>').description('cancel a job: queued tasks are dropped, running ones killed')).action(
    async (id: string, o: ClientFlags) => (await import('./client.ts')).cancelCommand(id, o, out),
  );
  registerNodeCommands(program, clientOptions);
  registerNamespaceCommands(program, clientOptions);
  registerAclCommands(program, clientOptions);
}

/** `namespaces` and `namespace create|set|delete`. */
function registerNamespaceCommands(program: Command, clientOptions: (c: Command) => Command): void {
  outputOptions(
    clientOptions(program.command('namespaces').description('the namespaces: weight, quota, RUs in use and jobs by state')),
    'the list, then again whenever it changes',
  ).action(async (o: ClientFlags & OutputFlags) => (await import('./namespace-commands.ts')).namespacesCommand(o, out));
  const ns = program.command('namespace').description('create, change or delete a namespace');
  const quota = (c: Command): Command =>
    clientOptions(c)
      .option(
        '--weight <w>',
        'its share of freed capacity against other namespaces with waiting jobs (default 1)',
        num('--weight', (x) => x > 0 && x <= 1_000_000, 'must be a number in (0, 1000000]'),
      )
      .option('--max-rus <n>', 'quota: RUs its tasks may hold at once (0: no limit)', intIn('--max-rus', { min: 0, max: 100_000_000 }))
      .option('--max-waiting-jobs <n>', 'quota: jobs it may have that are not final (0: no limit)', intIn('--max-waiting-jobs', { min: 0, max: 100_000_000 }))
      .option('--json', 'the namespace as the API returns it', false);
  quota(ns.command('create <name>').description('a new namespace (1-63 lower-case letters, digits or -)')).action(async (name: string, o: NamespaceFlags) =>
    (await import('./namespace-commands.ts')).namespacePutCommand('create', name, o, out),
  );
  quota(ns.command('set <name>').description("change a namespace's weight or quota (the flags not given keep their value)")).action(
    async (name: string, o: NamespaceFlags) => (await import('./namespace-commands.ts')).namespacePutCommand('set', name, o, out),
  );
  clientOptions(ns.command('delete <name>').description('delete a namespace that holds no job')).action(async (name: string, o: ClientFlags) =>
    (await import('./namespace-commands.ts')).namespaceDeleteCommand(name, o, out),
  );
}

/** -n: a namespace name, checked here so a typo is named before any call. */
function namespaceFlag(v: string): string {
  const problem = namespaceProblem(v);
  if (problem) throw new InvalidArgumentError(`--namespace ${problem} (got '${v.slice(0, 70)}')`);
  return v;
}

/** Registers `node` and `logs`; `clientOptions` adds the client flags every client command has. */
function registerNodeCommands(program: Command, clientOptions: (c: Command) => Command): void {
  const node = program.command('node').description('cordon, drain or uncordon a node (as kubectl cordon/drain, nomad node drain)');
  const common = (c: Command): Command =>
    clientOptions(c)
      .option('--reason <text>', 'why: shown by tarcil cluster and explain')
      .option('--json', 'machine-readable output: the server as it is now', false);
  common(node.command('cordon <server>').description('no new placements on the node; what runs there goes on')).action(async (id: string, o: NodeFlags) =>
    (await import('./node-commands.ts')).nodeCommand('cordon', id, o),
  );
  common(node.command('uncordon <server>').description('the node takes new placements again (ends a cordon or a drain)')).action(
    async (id: string, o: NodeFlags) => (await import('./node-commands.ts')).nodeCommand('uncordon', id, o),
  );
  common(node.command('drain <server>').description('cordon the node; its tasks finish, or at the deadline are stopped and placed elsewhere by their jobs'))
    .addOption(
      new Option('--deadline <duration>', 'how long running tasks may take to finish before they are stopped and placed elsewhere (0: at once)')
        .argParser(duration('--deadline', { min: 0, max: MAX_DRAIN_DEADLINE_MS }))
        .default(DEFAULT_DRAIN_DEADLINE_MS, fmtMs(DEFAULT_DRAIN_DEADLINE_MS)),
    )
    .option('--wait', 'wait until no task runs on the node', false)
    .action(async (id: string, o: NodeFlags) => (await import('./node-commands.ts')).nodeCommand('drain', id, o));

  clientOptions(
    program.command('logs <job-id> [task]').description("a task's stdout and stderr (task 0 unless given), from the node its latest attempt ran on"),
  )
    .option('-f, --follow', 'keep streaming while the attempt runs', false)
    .option('--node <host:port>', "read from this node's monitor (its NodeMonitor address) directly instead of through the front-end")
    .action(async (job: string, task: string | undefined, o: LogsFlags) => {
      const { logsCommand, taskArg } = await import('./node-commands.ts');
      await logsCommand(job, taskArg(task), o);
    });
}
