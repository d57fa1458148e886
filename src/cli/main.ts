/**
 * The `tarcil` command line: the program, its commands and flag parsing, exit codes.
 */
import { Command, Option } from 'commander';
import { isTarcilError } from '../util/errors.ts';
import { errorText, exitCodeFor } from './exit-codes.ts';
import { DEFAULT_BUCKETS } from '../admission/index.ts';
import { DEFAULT_AGENT_CONFIG } from '../agent/config.ts';
import { DEFAULT_MAX_SAMPLES } from '../sampling/size.ts';
import { benchCommand, EXPERIMENT_NAMES } from './bench.ts';
import { runDemo } from './demo.ts';
import { int, intIn, num, SEED_RANGE, unit } from './flags.ts';
import { registerLiveCommands } from './live-commands.ts';
import { profileCommand } from './profile.ts';
import { sampleSizeCommand } from './sample-size.ts';

const program = new Command();
program
  .name('tarcil')
  .description(
    'tarcil: a distributed, shared-state cluster scheduler that finds good resources fast\n' +
      '(interference-aware sampling with statistical guarantees, LSH admission control,\n' +
      'optimistic commits on etcd or the embedded store).',
  )
  .showHelpAfterError()
  .configureOutput({ outputError: (str, write) => write(str) })
  // A flag or argument commander rejects (bad value, unknown option, missing argument) exits 2, as
  // one rejected after parsing does (a TarcilError, below): commander's own default would be 1.
  // Help and --version still exit 0. Subcommands inherit this from the program.
  .exitOverride((err) => process.exit(err.exitCode === 0 ? 0 : 2));

program
  .command('demo', { isDefault: true })
  .description('several agents place a generated mixed workload on a demo cluster and explain each decision')
  .addOption(new Option('--store <url>', 'memory:// (embedded) or etcd://host:port').default('memory://'))
  .option('--cluster <name|file>', 'cluster spec from profiles/clusters or a file', 'demo')
  .option('--agents <n>', 'scheduling agents', int('--agents', 1, 64), 3)
  .option('--jobs <n>', 'jobs to submit', int('--jobs', 1, 100000), 40)
  .option('--load <x>', 'target utilisation of the generated workload', unit('--load'), 0.7)
  .option('--seed <n>', 'random seed', intIn('--seed', SEED_RANGE), 1)
  .option('--time-scale <x>', 'multiplies task durations', num('--time-scale', (x) => x > 0 && x <= 100, 'must be in (0, 100]'), 1)
  .addOption(new Option('--scope <scope>', 'conflict scope').choices(['ru', 'server']).default(DEFAULT_AGENT_CONFIG.conflictScope))
  .option('-v, --verbose', 'print every pick of large jobs', false)
  .action(async (o: { store: string; cluster: string; agents: number; jobs: number; load: number; seed: number; timeScale: number; scope: 'ru' | 'server'; verbose: boolean }) => {
    await runDemo({ ...o, out: (l) => process.stdout.write(`${l}\n`) });
  });

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
  .action((o: { quantile?: number; good?: number; population?: number; fraction?: number; failProb: number; cap: number; json: boolean }) => {
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
  .action((name: string, o: { cluster: string; load: number; seed: number; buckets: number; json: boolean }) => {
    process.stdout.write(profileCommand(name, o));
  });

program
  .command('bench <experiment>')
  .description(`simulator experiments: ${EXPERIMENT_NAMES.join(', ')}`)
  .option('--quick', 'small sizes (seconds to a minute or two)', false)
  .option('--seed <n>', 'random seed', intIn('--seed', SEED_RANGE), 1)
  .option('--out <dir>', 'results directory (default bench/results)')
  .option('--workers <n>', 'worker threads for independent runs (default: one per core; 1: one by one; same results)', intIn('--workers', { min: 1, max: 256 }))
  .option('--warmup-ms <ms>', "a fixed warm-up: jobs arriving before this virtual time are not measured (default: each workload's own, e.g. the first 10% of W4's arrivals)", intIn('--warmup-ms', { min: 0, max: 2 ** 31 - 1 }))
  .action(async (name: string, o: { quick: boolean; seed: number; out?: string; workers?: number; warmupMs?: number }) => {
    await benchCommand(name, o);
  });

registerLiveCommands(program);

try {
  await program.parseAsync(process.argv);
} catch (err) {
  if (isTarcilError(err)) {
    process.stderr.write(`error: ${errorText(err)}\n`);
    process.exit(exitCodeFor(err));
  }
  throw err;
}
