/**
 * What a decision costs on a busy cell that keeps changing, as a live front-end sees it once the
 * cell is nearly full: 10,000 servers × 16 RUs (the soak's cell) filled to a given occupancy with
 * the catalog's workloads; then decisions of the live default (two-sided quality, adaptive R)
 * for chunks of 1 and 42 tasks, each followed by its picks placed and as many random residents
 * ending, so occupancy stays put while servers change under the sampler (a task ends or starts on
 * a server about as often per decision as in the soak's full minutes). No store, no commit: the
 * decision alone.
 *
 * Run: npx tsx bench/decision-churn.ts [--quick] [--label <label>] [--loads 0.5,0.9,0.97,0.995] [--seconds 3]
 * Results: bench/results/decision-churn/decision-churn.{json,md}; rows of other labels already
 * there are kept (before and after in one file).
 */
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { AdmissionCounters } from '../src/admission/index.ts';
import { decide, DEFAULT_CORE_CONFIG, wireAdmission, type CoreContext } from '../src/agent/core.ts';
import { loadCatalog } from '../src/model/catalog.ts';
import type { JobSpec } from '../src/model/types.ts';
import { jobTarget } from '../src/quality/index.ts';
import { RuIndex } from '../src/sampling/ru-index.ts';
import { uniformServers } from '../src/state/seed.ts';
import { SystemClock } from '../src/util/clock.ts';
import { SeededRng } from '../src/util/rng.ts';
import { makeJob } from '../test/support/jobs.ts';
import { fmt, machine, mdTable, resultsDir, writeResults } from './lib/report.ts';

function flag(name: string, dflt: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 && process.argv[i + 1] !== undefined ? (process.argv[i + 1] as string) : dflt;
}
const quick = process.argv.includes('--quick');
const LABEL = flag('label', 'run');
const LOADS = flag('loads', quick ? '0.9,0.995' : '0.5,0.9,0.97,0.995')
  .split(',')
  .map(Number);
const SECONDS = Number(flag('seconds', quick ? '0.5' : '3'));
const SERVERS = quick ? 1000 : 10_000;
const RUS = 16;
const CHUNKS = [1, 42];

interface Row {
  label: string;
  commit: string;
  load: number;
  m: number;
  decisions: number;
  usPerDecision: number;
  usPerPick: number;
  candidates: number;
  R: number;
}

const catalog = loadCatalog();
const profiles = [...catalog.workloads.values()];
const clock = new SystemClock();
const rows: Row[] = [];
const commit = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { encoding: 'utf8' }).trim();

for (const load of LOADS) {
  for (const m of CHUNKS) {
    const rng = new SeededRng(42);
    const state = new RuIndex();
    const admission = new AdmissionCounters({ clock, seed: 0x7a3c11 });
    wireAdmission(state, admission);
    const busy: { server: string; index: number }[] = [];
    let rev = 1;
    const occupy = (server: string, index: number, n: number): void => {
      const p = profiles[n % profiles.length]!;
      state.setRu({ server, index }, { job: p.name, task: index, caused: p.caused, priority: 100, state: 'busy' }, ++rev);
      busy.push({ server, index });
    };
    state.batch(() => {
      for (const s of uniformServers(SERVERS, RUS)) state.upsertServer(s);
      for (const s of state.servers.values()) for (let i = 0; i < RUS; i++) if (rng.next() < load) occupy(s.id, i, rng.int(profiles.length));
    });
    const jobs: JobSpec[] = profiles.map((p, i) => makeJob(`churn-${i}`, p, m, { name: p.name, maxQueueMs: 0 }));
    const targets = jobs.map((j) => jobTarget(j.profile.caused));
    const ctx: CoreContext = { state, admission, rng, clock };
    const cfg = { ...DEFAULT_CORE_CONFIG };
    let n = 0;
    let us = 0;
    let picks = 0;
    let seen = 0;
    let R = 0;
    const t0 = performance.now();
    while (performance.now() - t0 < SECONDS * 1000) {
      const k = n % jobs.length;
      const a = performance.now();
      const d = decide(ctx, { job: jobs[k]!, target: targets[k]!, m, cfg, skipAdmission: true });
      us += (performance.now() - a) * 1000;
      n++;
      picks += d.selection.picks.length;
      seen += d.selection.candidatesSeen;
      R += d.R;
      // The picks start and as many residents end: occupancy stays, servers change.
      state.batch(() => {
        for (const p of d.selection.picks) occupy(p.server.id, p.index, n);
        for (let e = 0; e < d.selection.picks.length && busy.length > 0; e++) {
          const j = rng.int(busy.length);
          const ref = busy[j]!;
          busy[j] = busy[busy.length - 1]!;
          busy.pop();
          state.setRu(ref, null, ++rev);
        }
      });
    }
    const row: Row = { label: LABEL, commit, load, m, decisions: n, usPerDecision: us / n, usPerPick: us / Math.max(1, picks), candidates: seen / n, R: R / n };
    rows.push(row);
    process.stdout.write(
      `load ${load} m=${m}: ${fmt(row.usPerDecision, 0)} µs a decision, ${fmt(row.usPerPick, 1)} µs a pick, ${fmt(row.candidates, 0)} candidates, R ${fmt(row.R, 1)}\n`,
    );
  }
}

const outDir = resultsDir(quick, 'decision-churn');
const prevPath = join(outDir, 'decision-churn.json');
const kept: Row[] = existsSync(prevPath) ? (JSON.parse(readFileSync(prevPath, 'utf8')) as { rows: Row[] }).rows.filter((r) => r.label !== LABEL) : [];
const all = [...kept, ...rows];
const md = `# Decisions on a nearly full cell that keeps changing

${SERVERS} servers × ${RUS} RUs filled with the catalog's workloads; decisions of the live default
(two-sided quality, adaptive R) for chunks of ${CHUNKS.join(' and ')} tasks, each followed by its picks
placed and as many random residents ending; no store. \`npx tsx bench/decision-churn.ts --label <label>\` on ${machine()}.

${mdTable(
  ['label', 'commit', 'occupancy', 'tasks a decision', 'decisions', 'µs a decision', 'µs a pick', 'candidates', 'R'],
  all.map((r) => [r.label, r.commit.slice(0, 7), r.load, r.m, r.decisions, fmt(r.usPerDecision, 0), fmt(r.usPerPick, 1), fmt(r.candidates, 0), fmt(r.R, 1)]),
)}
`;
const paths = writeResults('decision-churn', { machine: machine(), rows: all }, md, outDir);
process.stdout.write(`\nwrote ${paths.join(', ')}\n`);
