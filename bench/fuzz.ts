/**
 * The wire fuzzer of test/frontend/fuzz.test.ts, run long: every (RPC, field path, mutation kind)
 * of the proto once (test/support/wire-fuzz.ts), then seeded random combinations up to the number
 * of requests asked for, against a front-end and the monitors of the demo cell in this process on
 * the embedded store (test/support/wire-fuzz-run.ts). Prints the requests and statuses per RPC,
 * the findings grouped with one example each (seed, case, RPC, field path, mutation, status, and
 * the server's stack for an INTERNAL answer), the process's unhandled rejections and the health
 * checks; writes bench/results/fuzz/fuzz.{md,json} (bench/results/quick/ with --quick). Exits 1 on a
 * finding.
 *
 * Run: npx tsx bench/fuzz.ts [--requests N] [--seed S] [--cases n1,n2] [--deadline-ms D] [--quick]
 *
 *   --requests N     requests in all (default 10,000; 1,500 with --quick): the exhaustive phase
 *                    first (its first N when N is smaller), then random cases
 *   --seed S         the run's seed (default 1)
 *   --cases a,b      replay only these cases of the run (as a finding printed them)
 *   --deadline-ms D  a call not answered within D ms is a finding (default 5000)
 */
import { machine, mdTable, resultsDir, writeResults } from './lib/report.ts';
import { describeFinding, groupFindings, startFuzzCell, summarize, WireFuzzer } from '../test/support/wire-fuzz-run.ts';
import { exhaustiveCases } from '../test/support/wire-fuzz.ts';

function arg(name: string): string | undefined {
  const i = process.argv.indexOf(name);
  return i >= 0 ? process.argv[i + 1] : undefined;
}

const quick = process.argv.includes('--quick');
const requests = Number(arg('--requests') ?? (quick ? 1500 : 10_000));
const seed = Number(arg('--seed') ?? 1);
const cases = arg('--cases')?.split(',').map(Number);
const deadlineMs = Number(arg('--deadline-ms') ?? 5000);
if (!Number.isInteger(requests) || requests <= 0) throw new Error('--requests must be a positive integer');
if (!Number.isInteger(seed)) throw new Error('--seed must be an integer');
if (cases?.some((n) => !Number.isInteger(n) || n < 0)) throw new Error('--cases: case numbers, comma-separated');

const say = (m: string): void => void process.stdout.write(`${m}\n`);

const rejections: string[] = [];
let fuzzer: WireFuzzer | undefined;
process.on('unhandledRejection', (e) => {
  rejections.push(e instanceof Error ? (e.stack ?? e.message) : String(e));
  fuzzer?.rejected(e);
});

async function main(): Promise<number> {
  const cell = await startFuzzCell({ seed });
  let code = 1;
  try {
    fuzzer = new WireFuzzer(cell);
    const exhaustive = exhaustiveCases(fuzzer.plan).length;
    const random = Math.max(0, requests - exhaustive);
    const only = cases ?? (requests < exhaustive ? Array.from({ length: requests }, (_, i) => i) : undefined);
    const sites = fuzzer.plan.sites;
    say(
      `${fuzzer.plan.rpcs.length} RPCs, ${sites.length} (RPC, field path) pairs, ${exhaustive} (RPC, path, kind) triples; ${requests} requests (seed ${seed})`,
    );
    let n = 0;
    const t0 = Date.now();
    const r = await fuzzer.run({
      seed,
      random,
      deadlineMs,
      ...(only ? { only } : {}),
      onOutcome: (o) => {
        n++;
        if (n % 1000 === 0) say(`  ${n} requests, ${((Date.now() - t0) / 1000).toFixed(0)} s`);
        for (const what of o.findings) say(`  finding at case ${o.c.n} (${o.c.rpc}, ${o.status}): ${what.slice(0, 200)}`);
      },
    });
    const summary = summarize(r);
    const groups = groupFindings(r);
    say('');
    say(summary.join('\n'));
    say(`\n${groups.length} kind(s) of finding`);
    for (const g of groups) say(`\n[${g.count}×] ${describeFinding(g.example)}`);
    const distinct = [...new Set(rejections.map((s) => s.split('\n')[0] ?? ''))];
    say(`\nunhandled rejections in the process: ${rejections.length}${distinct.length ? `\n  ${distinct.slice(0, 20).join('\n  ')}` : ''}`);
    const cmd = `npx tsx bench/fuzz.ts${process.argv.slice(2).length > 0 ? ` ${process.argv.slice(2).join(' ')}` : ''}`;
    const kinds = new Map<string, number>();
    for (const o of r.outcomes) for (const m of o.c.mutations) kinds.set(m.kind, (kinds.get(m.kind) ?? 0) + 1);
    const md = `# The gRPC API under the wire fuzzer

\`${cmd}\` on ${machine()}, ${new Date().toISOString().slice(0, 10)}: ${fuzzer.plan.rpcs.length} RPCs, ${sites.length} (RPC, field path) pairs, ${exhaustive} (RPC, path, kind) triples sent once each, then random combinations (seed ${seed}).

\`\`\`
${summary.join('\n')}
\`\`\`

Unhandled rejections in the process: ${rejections.length}.

${mdTable(
  ['mutation kind', 'requests'],
  [...kinds].sort((a, b) => b[1] - a[1]),
)}

## Findings

${groups.length === 0 ? 'None.' : groups.map((g) => `- ${g.count}×: \`${describeFinding(g.example).replace(/`/g, "'").split('\n').join(' / ').slice(0, 600)}\``).join('\n')}
`;
    const paths = writeResults(
      'fuzz',
      {
        machine: machine(),
        command: cmd,
        seed,
        requests: r.outcomes.length,
        ms: r.ms,
        health: r.health,
        rejections: distinct,
        findings: groups.map((g) => ({ count: g.count, example: describeFinding(g.example) })),
        byRpc: summary.slice(1),
      },
      md,
      resultsDir(quick, 'fuzz'),
    );
    say(`wrote ${paths.join(', ')}`);
    code = r.findings.length === 0 && r.health.length === 0 && rejections.length === 0 ? 0 : 1;
  } finally {
    await cell.close();
  }
  return code;
}

process.exit(await main());
