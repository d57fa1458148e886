/**
 * Commit-ahead on a real etcd: how long a job larger than one transaction takes to place, with its
 * chunks committed one after the other (`commitAhead: 1`) and with up to four in flight (the
 * default). One agent configured as a front-end's (it keeps no job record; group commit on), a
 * private etcd (free port, temporary data directory) seeded with 2,000 servers × 16 RUs (more
 * with more repetitions: nothing is freed, and the cell ends about two thirds full), and
 * jobs of 42 to 1,024 tasks placed one at a time, the variants interleaved in each repetition so
 * that both see the same cell as it fills. Time: from the call to
 * schedule() to its return, every task placed.
 *
 * Run: npx tsx bench/commit-ahead.ts [--quick] [--reps 25]
 * Results: bench/results/commit-ahead/commit-ahead.{md,json} (--quick: bench/results/quick/).
 */
import { SchedulingAgent } from '../src/agent/agent.ts';
import { seedCluster, uniformServers } from '../src/state/seed.ts';
import { openStore } from '../src/store/index.ts';
import { Keys } from '../src/state/keys.ts';
import { SystemClock } from '../src/util/clock.ts';
import { createLogger } from '../src/util/log.ts';
import { SeededRng } from '../src/util/rng.ts';
import { ensureEtcd, startEtcd } from '../test/support/etcd.ts';
import { benchJob } from './lib/jobs.ts';
import { fmt, machine, mdTable, pct, resultsDir, writeResults } from './lib/report.ts';

const quick = process.argv.includes('--quick');
const repsArg = process.argv.indexOf('--reps');
const REPS = repsArg >= 0 ? Number(process.argv[repsArg + 1]) : quick ? 2 : 25;
const RUS = 16;
const SIZES = quick ? [42, 128, 256] : [42, 84, 128, 256, 1024];
// Nothing is freed during the run: the cell is sized to end about two thirds full.
const SERVERS = Math.max(quick ? 500 : 2000, Math.ceil((REPS * 2 * SIZES.reduce((a, b) => a + b, 0)) / RUS / 0.67 / 100) * 100);
const VARIANTS = [1, 4] as const;

const bin = ensureEtcd((m) => process.stdout.write(`${m}\n`));
const etcd = await startEtcd({ bin });
const url = etcd.endpoint.replace('http://', 'etcd://');
const clock = new SystemClock();
const log = createLogger('bench', 'silent');
const keys = new Keys('/bench-ahead/');
const t0 = Date.now();

interface Sample {
  commitAhead: number;
  tasks: number;
  ms: number;
  commits: number;
  conflicts: number;
}
const samples: Sample[] = [];

const admin = await openStore(url);
const stores = await Promise.all(VARIANTS.map(() => openStore(url)));
try {
  await seedCluster(admin, keys, uniformServers(SERVERS, RUS));
  const agents = VARIANTS.map(
    (commitAhead, i) =>
      new SchedulingAgent({
        id: `ahead${commitAhead}`,
        store: stores[i]!,
        keys,
        clock,
        rng: new SeededRng(7 + i),
        log,
        config: { recordJob: false, consumeQueue: false, commitAhead },
      }),
  );
  await Promise.all(agents.map((a) => a.start()));
  let n = 0;
  let placed = 0;
  /** Both views show every placement so far (the other agent's arrive through its watch). */
  const settled = async (): Promise<void> => {
    const end = Date.now() + 30_000;
    while (agents.some((a) => a.state.available.size !== SERVERS * RUS - placed)) {
      if (Date.now() > end) throw new Error("the agents' views did not settle");
      await new Promise((r) => setTimeout(r, 5));
    }
  };
  for (let rep = 0; rep < REPS; rep++) {
    for (const tasks of SIZES) {
      // Alternate which variant goes first, so neither always meets the emptier cell.
      const order = rep % 2 === 0 ? agents.map((_, i) => i) : agents.map((_, i) => agents.length - 1 - i);
      for (const i of order) {
        const agent = agents[i]!;
        await settled();
        const commits0 = agent.stats.commits;
        const s = performance.now();
        const rec = await agent.schedule(benchJob(n++, tasks));
        placed += tasks;
        samples.push({ commitAhead: VARIANTS[i]!, tasks, ms: performance.now() - s, commits: agent.stats.commits - commits0, conflicts: rec.conflicts });
      }
    }
    process.stdout.write(`rep ${rep + 1}/${REPS} done\n`);
  }
  await Promise.all(agents.map((a) => a.close()));
} finally {
  await Promise.all(stores.map((s) => s.close()));
  await admin.close();
  await etcd.stop();
}

const rows = SIZES.map((tasks) => {
  const of = (v: number): Sample[] => samples.filter((s) => s.tasks === tasks && s.commitAhead === v);
  const [seq, ahead] = VARIANTS.map((v) => of(v));
  const med = (xs: Sample[]): number =>
    pct(
      xs.map((x) => x.ms),
      0.5,
    );
  return {
    tasks,
    chunks: Math.ceil(tasks / agentsPicks()),
    sequentialP50: med(seq!),
    sequentialP90: pct(
      seq!.map((x) => x.ms),
      0.9,
    ),
    aheadP50: med(ahead!),
    aheadP90: pct(
      ahead!.map((x) => x.ms),
      0.9,
    ),
    ratio: med(ahead!) / med(seq!),
    conflicts: [seq!, ahead!].map((xs) => xs.reduce((a, x) => a + x.conflicts, 0)),
  };
});

function agentsPicks(): number {
  return Math.floor((128 - 2) / 3);
}

const md = `# Commit-ahead: placing a job larger than one transaction

One agent configured as a front-end's (no job record; group commit with two requests in flight)
on a private etcd 3.4 seeded with ${SERVERS.toLocaleString('en')} servers × ${RUS} RUs; jobs of ${SIZES[0]} to
${SIZES.at(-1)!.toLocaleString('en')} tasks (42 per transaction under etcd's default \`--max-txn-ops\` of 128) placed one at a time,
never held by admission, ${REPS} repetitions with the two variants interleaved (the order
alternating), on a cell that fills to ${Math.round((100 * samples.reduce((a, s) => a + s.tasks, 0)) / (SERVERS * RUS))}% by the end. Time: the call to \`schedule()\` to its
return, every task placed. Measured with \`npx tsx bench/commit-ahead.ts${quick ? ' --quick' : ''}\` on ${machine()}; whole run ${Math.round((Date.now() - t0) / 1000)} s.

${mdTable(
  ['tasks', 'transactions', 'chunk after chunk p50 / p90 ms', 'commit-ahead p50 / p90 ms', 'p50 ratio', 'conflicts (1 / 4)'],
  rows.map((r) => [
    r.tasks,
    r.chunks,
    `${fmt(r.sequentialP50)} / ${fmt(r.sequentialP90)}`,
    `${fmt(r.aheadP50)} / ${fmt(r.aheadP90)}`,
    fmt(r.ratio, 2),
    r.conflicts.join(' / '),
  ]),
)}

"chunk after chunk" is \`--agent commitAhead=1\`; "commit-ahead" the default (\`commitAhead: 4\`: up to
four chunks in flight, full chunks sent straight to etcd rather than through group commit's two
requests). A job of 42 tasks is one chunk either way: its two columns differ only by chance.
`;
const paths = writeResults(
  'commit-ahead',
  { machine: machine(), servers: SERVERS, rus: RUS, reps: REPS, rows, samples },
  md,
  resultsDir(quick, 'commit-ahead'),
);
process.stdout.write(`${md}\nwrote ${paths.join(', ')}\n`);
