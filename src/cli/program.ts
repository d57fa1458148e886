/**
 * The `tarcil` command line: the program, its commands and their flags, and the conventions every
 * command shares: --version, a suggestion for a mistyped command or option, help for a bare
 * `tarcil`, a quiet end when the reader of its output goes away (`| head`), and the exit codes of
 * exit-codes.ts.
 */
import { Command, CommanderError, Option } from 'commander';
import { isTarcilError } from '../util/errors.ts';
import { packageVersion } from '../util/package-root.ts';
import { errorText, EXIT, exitCodeFor } from './exit-codes.ts';
import { DEFAULT_BUCKETS } from '../admission/lsh.ts';
import { DEFAULT_AGENT_CONFIG } from '../agent/defaults.ts';
import { DEFAULT_MAX_SAMPLES } from '../sampling/size.ts';
import { EXPERIMENT_NAMES } from '../sim/experiments/names.ts';
import { int, intIn, num, SEED_RANGE, unit } from './flags.ts';
import { CLIENT_DEFAULTS, FRONTEND_LIMITS } from '../frontend/options.ts';
import { logOptions, registerLiveCommands } from './live-commands.ts';

// Each command's action imports what it runs when it runs: a client command does not load the
// simulator (vega), the store (etcd3) or the daemons, and `--help` loads none of them.

/**
 * Where every exit goes through: commander's (help, --version, a refused command line) and a
 * command's error. Commander exits 1 for a command line it refuses; tarcil makes that a usage
 * error (2). Help and --version exit 0.
 */
function exit(err: CommanderError): never {
  process.exit(err.code.startsWith('commander.') ? (err.exitCode === 0 ? EXIT.OK : EXIT.USAGE) : err.exitCode);
}

/** Runs the command line on `argv` (process.argv: node, the script, then the arguments). */
export async function runCli(argv: string[]): Promise<void> {
  // A reader that goes away (`tarcil jobs | head -1`) ends the command quietly, as it would end a
  // Unix tool through SIGPIPE, instead of with an EPIPE stack trace.
  for (const stream of [process.stdout, process.stderr]) {
    stream.on('error', (err: NodeJS.ErrnoException) => {
      if (err.code === 'EPIPE') process.exit(EXIT.OK);
      throw err;
    });
  }

  const program = new Command();
  program
    .name('tarcil')
    .description(
      'tarcil: a distributed, shared-state cluster scheduler that finds good resources fast ' +
        '(interference-aware sampling with statistical guarantees, LSH admission control, ' +
        'optimistic commits on etcd or the embedded store).',
    )
    .version(packageVersion(), '-V, --version', "print tarcil's version")
    // Colour only on a terminal, never with $NO_COLOR (color.ts); --no-color sets it for the whole process.
    .option('--no-color', 'no ANSI colour in the output (the same as NO_COLOR=1; colour is only ever used on a terminal)')
    .showSuggestionAfterError()
    .showHelpAfterError('(add --help for usage)')
    .configureOutput({ outputError: (str, write) => write(str) })
    // Subcommands inherit this from the program.
    .exitOverride(exit)
    .addHelpText(
      'after',
      `\nExit codes: ${EXIT.OK} done, ${EXIT.FAILURE} failed, ${EXIT.USAGE} usage (a bad command, flag or job spec), ${EXIT.NOT_FOUND} not found,\n${EXIT.UNAVAILABLE} front-end or store unavailable, ${EXIT.JOB_FAILED} the job failed (submit --wait).`,
    );

  program.hook('preAction', () => {
    if (program.opts<{ color: boolean }>().color === false) process.env.NO_COLOR = '1';
  });

  registerLiveCommands(program);

  program
    .command('validate')
    .description(
      "check a job spec file as the front-end would (schema/jobspec.schema.json and the catalog's names): OK, or each field and the rule it breaks (exit code 2)",
    )
    .argument('<spec.json>', 'the job spec: a JSON file, or - to read it from stdin')
    .option('--no-catalog', "check the schema only, without looking profile and platform names up in this installation's profiles/")
    .option('--json', 'machine-readable output: {file, valid, issues: [{field, rule}]}', false)
    .action(async (file: string, o: { catalog: boolean; json: boolean }) => {
      const { validateCommand } = await import('./validate.ts');
      process.exitCode = validateCommand(
        file,
        o,
        (l) => process.stdout.write(`${l}\n`),
        (l) => process.stderr.write(`${l}\n`),
      );
    });

  program.commandsGroup('Try and measure:');
  logOptions(program.command('demo'), 'warn')
    .description('several agents place a generated mixed workload on a demo cluster and explain each decision')
    .addOption(new Option('--store <url>', 'memory:// (embedded) or etcd://host:port').default('memory://'))
    .option('--cluster <name|file>', 'cluster spec from profiles/clusters or a file', 'demo')
    .option('--agents <n>', 'scheduling agents', int('--agents', 1, 64), 3)
    .option('--jobs <n>', 'jobs to submit', int('--jobs', 1, 100000), 40)
    .option('--load <x>', 'target utilisation of the generated workload', unit('--load'), 0.7)
    .option('--seed <n>', 'random seed', intIn('--seed', SEED_RANGE), 1)
    .option(
      '--time-scale <x>',
      'multiplies task durations',
      num('--time-scale', (x) => x > 0 && x <= 100, 'must be in (0, 100]'),
      1,
    )
    .addOption(new Option('--scope <scope>', 'conflict scope').choices(['ru', 'server']).default(DEFAULT_AGENT_CONFIG.conflictScope))
    .option('-v, --verbose', 'print every pick of large jobs', false)
    .action(
      async (o: {
        store: string;
        cluster: string;
        agents: number;
        jobs: number;
        load: number;
        seed: number;
        timeScale: number;
        scope: 'ru' | 'server';
        verbose: boolean;
        logLevel: string;
      }) => {
        const { runDemo } = await import('./demo.ts');
        await runDemo({ ...o, out: (l) => process.stdout.write(`${l}\n`) });
      },
    );

  program
    .command('sample-size')
    .description('sample size R from the x^R guarantee (paper §3.3), and the guarantee it gives')
    .option('--quantile <x>', 'quality quantile to beat: P[best of R below x] = x^R', unit('--quantile'))
    .option('--good <n>', 'acceptable RUs in the population (with --population)', int('--good', 1, 1e9))
    .option('--population <n>', 'RUs in the sampled population (with --good)', int('--population', 1, 1e9))
    .option('--fraction <f>', 'share of the population that is acceptable', unit('--fraction'))
    .option('--fail-prob <p>', 'accepted probability of missing', unit('--fail-prob'), 1e-3)
    .option('--cap <n>', 'cap applied by the agents', int('--cap', 1, 100000), DEFAULT_MAX_SAMPLES)
    .option('--json', 'machine-readable output', false)
    .action(async (o: { quantile?: number; good?: number; population?: number; fraction?: number; failProb: number; cap: number; json: boolean }) => {
      const { sampleSizeCommand } = await import('./sample-size.ts');
      process.stdout.write(sampleSizeCommand(o));
    });

  program
    .command('profile <profile>')
    .description("a workload profile's target quality T_W, resource order and acceptable LSH buckets on a cluster")
    .option('--cluster <name|file>', 'cluster spec to judge the buckets against', 'ec2-100')
    .option('--load <x>', 'resident load placed on the cluster before judging', unit('--load'), 0.6)
    .option('--seed <n>', 'random seed for the resident load', intIn('--seed', SEED_RANGE), 1)
    .option('--buckets <n>', 'LSH buckets', int('--buckets', 2, 1024), DEFAULT_BUCKETS)
    .option('--json', 'machine-readable output', false)
    .option('--learned', 'ask a running front-end for the profile learned from what the monitors measured, next to the declared one', false)
    .option('--server <host:port>', 'the tarcil front-end (with --learned)', process.env.TARCIL_SERVER ?? CLIENT_DEFAULTS.server)
    .option('--tls-ca <file>', 'connect over TLS, trusting this CA (with --learned)')
    .addOption(new Option('--token <token>', 'access token (with --learned; needed when the front-end has ACLs on)').env('TARCIL_TOKEN'))
    .option('--timeout <ms>', 'deadline of the call (with --learned)', intIn('--timeout', FRONTEND_LIMITS.timeoutMs), CLIENT_DEFAULTS.timeoutMs)
    .action(
      async (
        name: string,
        o: {
          cluster: string;
          load: number;
          seed: number;
          buckets: number;
          json: boolean;
          learned: boolean;
          server: string;
          tlsCa?: string;
          token?: string;
          timeout: number;
        },
      ) => {
        if (o.learned) {
          const { learnedProfileCommand } = await import('./client.ts');
          return learnedProfileCommand(name, o, (s) => process.stdout.write(`${s}\n`));
        }
        const { profileCommand } = await import('./profile.ts');
        process.stdout.write(profileCommand(name, o));
      },
    );

  program
    .command('bench <experiment>')
    .description(`simulator experiments: ${EXPERIMENT_NAMES.join(', ')}`)
    .option('--quick', 'small sizes (seconds to a minute or two)', false)
    .option('--seed <n>', 'random seed', intIn('--seed', SEED_RANGE), 1)
    .option('--out <dir>', 'results directory (default bench/results/<experiment>, bench/results/quick with --quick)')
    .option(
      '--workers <n>',
      'worker threads for independent runs (default: one per core; 1: one by one; same results)',
      intIn('--workers', { min: 1, max: 256 }),
    )
    .option(
      '--warmup-ms <ms>',
      "a fixed warm-up: jobs arriving before this virtual time are not measured (default: each workload's own, e.g. the first 10% of W4's arrivals)",
      intIn('--warmup-ms', { min: 0, max: 2 ** 31 - 1 }),
    )
    .option('--nodes <file>', 'bench trace: the node list (CSV, docs/traces.md)')
    .option('--pods <file>', 'bench trace: the pod list, or the job list of the generic format (CSV)')
    .addOption(new Option('--format <format>', "bench trace: the files' format").choices(['alibaba', 'generic']).default('alibaba'))
    .option(
      '--compress <n>',
      'bench trace: divides arrival times and durations',
      num('--compress', (x) => x >= 1 && x <= 1e6, 'must be in [1, 1000000]'),
      1,
    )
    .action(
      async (
        name: string,
        o: {
          quick: boolean;
          seed: number;
          out?: string;
          workers?: number;
          warmupMs?: number;
          nodes?: string;
          pods?: string;
          format: 'alibaba' | 'generic';
          compress: number;
        },
      ) => {
        const { benchCommand } = await import('./bench.ts');
        const { nodes, pods, format, compress, ...rest } = o;
        await benchCommand(name, { ...rest, trace: { ...(nodes !== undefined ? { nodes } : {}), ...(pods !== undefined ? { pods } : {}), format, compress } });
      },
    );

  const trace = program.command('trace').description('production traces as tarcil workloads (docs/traces.md)');
  trace
    .command('inspect')
    .description(
      'load a trace (nodes and pods), map it to servers and jobs, and print what it became; a bad row: its file, line, column and rule (exit code 2)',
    )
    .requiredOption('--nodes <file>', 'the node list (CSV)')
    .requiredOption('--pods <file>', 'the pod list, or the job list of the generic format (CSV)')
    .addOption(new Option('--format <format>', "the files' format").choices(['alibaba', 'generic']).default('alibaba'))
    .option(
      '--compress <n>',
      'divides arrival times and durations',
      num('--compress', (x) => x >= 1 && x <= 1e6, 'must be in [1, 1000000]'),
      1,
    )
    .option('--seed <n>', 'seed of the rule that assigns interference profiles', intIn('--seed', SEED_RANGE), 1)
    .action(async (o: { nodes: string; pods: string; format: 'alibaba' | 'generic'; compress: number; seed: number }) => {
      const { traceInspectCommand } = await import('./trace.ts');
      traceInspectCommand(o, (l) => process.stdout.write(`${l}\n`));
    });

  // A bare `tarcil` prints the help (the demo is `tarcil demo`).
  if (argv.length <= 2) program.help();

  try {
    await program.parseAsync(argv);
  } catch (err) {
    if (!isTarcilError(err)) throw err;
    process.stderr.write(`error: ${errorText(err)}\n`);
    exit(new CommanderError(exitCodeFor(err), `tarcil.${err.code}`, err.message));
  }
}
