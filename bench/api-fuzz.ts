/**
 * The Scheduler API property of test/frontend/api-property.test.ts (shared code in
 * test/support/api-property.ts), run for longer: random job specs (valid, invalid, at every
 * documented limit) and calls against a front-end of the demo cell, on the embedded MemoryStore
 * and on a private etcd, one store after the other. Writes a short summary to
 * bench/results/api-fuzz/api-fuzz.{md,json} (bench/results/quick/ with --quick).
 *
 * Run: npx tsx bench/api-fuzz.ts [--minutes M] [--runs N] [--quick] [--seed S [--path P]]
 *        [--stores memory,etcd] [--only prop1,prop2] [--no-examples] [--scenario file.json]
 *
 *   --minutes M    time per store, shrinking included (default 2; 0.5 with --quick)
 *   --runs N       scenarios per store (default: as many as fit the time; with --runs and no
 *                  --minutes, no time limit)
 *   --seed, --path replay what a failed run printed (keep the same --stores and examples)
 *   --only         only these properties fail a scenario (the others are still counted)
 *   --scenario f   run the scenario in file f (a JSON array of calls, or fast-check's
 *                  counterexample [[...]]) once per store and print what broke; writes nothing
 */
import { readFileSync } from 'node:fs';
import { ensureEtcd, startEtcd, type EtcdProcess } from '../test/support/etcd.ts';
import {
  DEFAULT_TIMING,
  parseOnly,
  PROPERTIES,
  runApiProperty,
  runScenario,
  startApiCell,
  summarize,
  type Cmd,
  type PropertyResult,
  type StoreKind,
} from '../test/support/api-property.ts';
import { machine, mdTable, resultsDir, writeResults } from './lib/report.ts';

function arg(name: string): string | undefined {
  const i = process.argv.indexOf(name);
  return i >= 0 ? process.argv[i + 1] : undefined;
}

const quick = process.argv.includes('--quick');
const runsArg = arg('--runs');
const minutesArg = arg('--minutes');
const minutes = minutesArg !== undefined ? Number(minutesArg) : runsArg !== undefined ? 24 * 60 : quick ? 0.5 : 2;
const runs = runsArg !== undefined ? Number(runsArg) : quick ? 20 : Number.MAX_SAFE_INTEGER;
const seedArg = arg('--seed');
const pathArg = arg('--path');
const only = parseOnly(arg('--only'));
const stores = (arg('--stores') ?? 'memory,etcd').split(',').map((s) => s.trim()) as StoreKind[];
const scenarioFile = arg('--scenario');
const logLevel = process.env.TARCIL_LOG ?? 'silent';
for (const s of stores as string[]) if (s !== 'memory' && s !== 'etcd') throw new Error(`--stores: unknown store '${s}' (memory, etcd)`);
if (!Number.isFinite(minutes) || minutes <= 0) throw new Error('--minutes must be a positive number');
if (!Number.isInteger(runs) || runs <= 0) throw new Error('--runs must be a positive integer');

const say = (m: string): void => {
  process.stdout.write(`${m}\n`);
};

let etcd: EtcdProcess | undefined;
const endpoint = async (): Promise<string> => {
  etcd ??= await startEtcd({ bin: ensureEtcd(say) });
  return etcd.endpoint;
};

async function replay(file: string): Promise<number> {
  const parsed = JSON.parse(readFileSync(file, 'utf8')) as unknown;
  // fast-check prints a counterexample as the property's arguments: [[cmd, ...]].
  const cmds = (Array.isArray(parsed) && Array.isArray(parsed[0]) ? parsed[0] : parsed) as Cmd[];
  let broken = 0;
  for (const kind of stores) {
    const cell = await startApiCell({ kind, ...(kind === 'etcd' ? { etcdEndpoint: await endpoint() } : {}), logLevel });
    try {
      const t0 = Date.now();
      const v = await runScenario(cell, cmds, DEFAULT_TIMING);
      say(`${kind}: ${v.length === 0 ? 'no violation' : `${v.length} violation(s)`} in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
      for (const x of v) say(`  [${x.property}] ${x.message}`);
      broken += v.length;
    } finally {
      await cell.close();
    }
  }
  return broken;
}

function storeSection(r: PropertyResult): string {
  const s = r.stats;
  const props = (Object.keys(PROPERTIES) as (keyof typeof PROPERTIES)[]).map((p) => [
    p,
    r.violations[p] ?? 0,
    r.examples[p] ? r.examples[p].replace(/\|/g, '\\|').replace(/\n/g, ' ').slice(0, 300) : '',
  ]);
  const answers = Object.entries(s.codes)
    .sort()
    .map(([k, v]) => [k, v]);
  return `## ${r.kind === 'memory' ? 'Embedded MemoryStore' : 'etcd'}

${r.ok ? '**passed**' : '**FAILED**'}: ${r.numRuns} scenarios in ${(r.elapsedMs / 1000).toFixed(0)} s${r.interrupted ? ' (stopped by the time limit)' : ''}, ${r.numShrinks} shrinks, seed ${r.seed}; ${r.cellRestarts} fresh cells after failed scenarios, ${r.cellRecycles} recycled; health at the end: ${r.health}.

Accepted ${s.accepted} jobs (${s.acceptedTasks} tasks, the largest ${s.maxTasksAccepted}); final states ${Object.entries(s.finalStates)
    .map(([k, v]) => `${k} ${v}`)
    .join(
      ', ',
    )}; at the end of their scenario ${s.waitingAtEnd} were waiting and ${s.workingAtEnd} still working, ${s.cancelledAtEnd} were cancelled; ${s.watchEvents} WatchJob events checked.

${mdTable(['property', 'violations', 'first seen'], props)}

<details><summary>answers by call and status</summary>

${mdTable(['call and status', 'count'], answers)}

</details>
${r.ok ? '' : `\nCounterexample (fast-check report):\n\n\`\`\`\n${r.report.slice(0, 6000)}\n\`\`\`\n`}`;
}

async function main(): Promise<number> {
  if (scenarioFile) return (await replay(scenarioFile)) > 0 ? 1 : 0;
  const results: PropertyResult[] = [];
  for (const kind of stores) {
    say(`${kind}: up to ${runs === Number.MAX_SAFE_INTEGER ? 'unlimited' : runs} scenarios in ${minutes} min`);
    const r = await runApiProperty({
      kind,
      ...(kind === 'etcd' ? { etcdEndpoint: await endpoint() } : {}),
      logLevel,
      numRuns: runs,
      timeLimitMs: minutes * 60_000,
      recycleEvery: 100,
      ...(seedArg !== undefined ? { seed: Number(seedArg) } : {}),
      ...(pathArg !== undefined ? { path: pathArg } : {}),
      ...(only ? { only } : {}),
      examples: !process.argv.includes('--no-examples'),
      onProgress: say,
    });
    results.push(r);
    say(summarize(r));
    if (!r.ok) say(r.report);
  }
  const mem = process.memoryUsage();
  const heap = `bench process heap ${(mem.heapUsed / 2 ** 20).toFixed(0)} MiB, rss ${(mem.rss / 2 ** 20).toFixed(0)} MiB`;
  say(heap);
  const cmd = `npx tsx bench/api-fuzz.ts${process.argv.slice(2).length > 0 ? ` ${process.argv.slice(2).join(' ')}` : ''}`;
  const md = `# Scheduler API property, fuzzed

\`${cmd}\` on ${machine()}, ${new Date().toISOString().slice(0, 10)}. Each scenario is up to 8 random calls against a
front-end of the demo cell (10 servers, 24 RUs, 2 racks; 2 agents; a monitor per server with the
simulated executor): SubmitJob with a spec_json that is valid or not, small or at a documented
limit (up to 100,000 tasks, priorities 0 and 999, gang, spread, constraints no server meets,
64 KiB), retries with request ids, Get/Cancel/Explain/WatchJob of existing, unknown and malformed
ids, ListJobs with valid and unknown states. Then every job must be final or visibly waiting; the
rest are cancelled and must end cancelled, every WatchJob stream must show one final event with
ordered revisions, and the cell must be idle and healthy. Properties: \`test/support/api-property.ts\`
(PROPERTIES). ${heap}.

${results.map(storeSection).join('\n')}`;
  const paths = writeResults(
    'api-fuzz',
    { machine: machine(), command: cmd, results: results.map((r) => ({ ...r, report: r.report.slice(0, 20_000) })) },
    md,
    resultsDir(quick, 'api-fuzz'),
  );
  say(`wrote ${paths.join(', ')}`);
  return results.every((r) => r.ok) ? 0 : 1;
}

let code = 1;
try {
  code = await main();
} finally {
  await etcd?.stop();
}
process.exit(code);
