/**
 * Decision cost per task (admission + size + sample + score + select, no commit) as the cluster
 * grows: it must stay flat (O(R), not O(cluster size)). Run: npx tsx bench/decision-cost.ts [--quick]
 */
import { AdmissionCounters } from '../src/admission/index.ts';
import { decide, DEFAULT_CORE_CONFIG, wireAdmission, type CoreContext } from '../src/agent/core.ts';
import { loadCatalog } from '../src/model/catalog.ts';
import type { JobSpec } from '../src/model/types.ts';
import { jobTarget } from '../src/quality/index.ts';
import { RuIndex } from '../src/sampling/ru-index.ts';
import { uniformServers } from '../src/state/seed.ts';
import { SystemClock } from '../src/util/clock.ts';
import { SeededRng } from '../src/util/rng.ts';
import { fmt, machine, mdTable, pct, resultsDir, writeResults } from './lib/report.ts';
import { makeJob } from '../test/support/jobs.ts';

const quick = process.argv.includes('--quick');
const sizes = [1_600, 16_000, 160_000];
const Rs = [8, 32];
const DECISIONS = quick ? 5_000 : 40_000;
const LOAD = 0.5;

const catalog = loadCatalog();
const profiles = [...catalog.workloads.values()];
const clock = new SystemClock();

interface Row {
  rus: number;
  R: number;
  p50us: number;
  p99us: number;
  meanus: number;
  admissionUs: number;
  selectUs: number;
  decisions: number;
}
const rows: Row[] = [];

for (const rus of sizes) {
  const rng = new SeededRng(42);
  const state = new RuIndex();
  const admission = new AdmissionCounters({ clock, seed: 0x7a3c11 });
  wireAdmission(state, admission);
  const setupStart = performance.now();
  state.batch(() => {
    for (const s of uniformServers(rus / 8, 8)) state.upsertServer(s);
    for (const s of state.servers.values()) {
      for (let i = 0; i < 8; i++) {
        if (rng.next() < LOAD) {
          const p = profiles[rng.int(profiles.length)]!;
          state.setRu({ server: s.id, index: i }, { job: p.name, task: i, caused: p.caused, priority: 100, state: 'busy' }, 1);
        }
      }
    }
  });
  const setupMs = performance.now() - setupStart;
  const jobs: JobSpec[] = profiles.map((p, i) => makeJob(`bench-${i}`, p, 1, { name: p.name, maxQueueMs: 0 }));
  const targets = jobs.map((j) => jobTarget(j.profile.caused));
  for (const R of Rs) {
    const ctx: CoreContext = { state, admission, rng, clock };
    const cfg = { ...DEFAULT_CORE_CONFIG, fixedR: R };
    const times: number[] = [];
    const adm: number[] = [];
    const sel: number[] = [];
    for (let w = 0; w < 2000; w++) decide(ctx, { job: jobs[w % jobs.length]!, target: targets[w % jobs.length]!, m: 1, cfg });
    for (let d = 0; d < DECISIONS; d++) {
      const k = d % jobs.length;
      const t0 = performance.now();
      const res = decide(ctx, { job: jobs[k]!, target: targets[k]!, m: 1, cfg });
      times.push((performance.now() - t0) * 1000);
      adm.push(res.stageUs.admission);
      sel.push(res.stageUs.select);
      if (res.selection.picks.length !== 1) throw new Error('no pick');
    }
    const row: Row = {
      rus,
      R,
      p50us: pct(times, 0.5),
      p99us: pct(times, 0.99),
      meanus: times.reduce((a, b) => a + b, 0) / times.length,
      admissionUs: pct(adm, 0.5),
      selectUs: pct(sel, 0.5),
      decisions: DECISIONS,
    };
    rows.push(row);
    process.stdout.write(
      `${String(rus).padStart(7)} RUs  R=${String(R).padStart(2)}  p50 ${fmt(row.p50us)} µs  p99 ${fmt(row.p99us)} µs  (admission ${fmt(row.admissionUs)} µs, select ${fmt(row.selectUs)} µs; cluster built in ${fmt(setupMs, 0)} ms)\n`,
    );
  }
}

const r8 = rows.filter((r) => r.R === 8);
const growth = (r8[r8.length - 1]?.p50us ?? NaN) / (r8[0]?.p50us ?? NaN);
const md = `# Decision cost per task

admission + sample size + sample + score + select for a one-task job, no commit; resident load
${LOAD * 100}% drawn from the catalog's workload profiles; ${DECISIONS} decisions per cell after a
warm-up; measured with \`npx tsx bench/decision-cost.ts${quick ? ' --quick' : ''}\` on ${machine()}.

${mdTable(
  ['RUs', 'R', 'p50 µs', 'p99 µs', 'mean µs', 'admission p50 µs', 'select p50 µs'],
  rows.map((r) => [r.rus, r.R, fmt(r.p50us), fmt(r.p99us), fmt(r.meanus), fmt(r.admissionUs), fmt(r.selectUs)]),
)}

p50 at R = 8 grows ×${fmt(growth, 2)} from ${sizes[0]} to ${sizes[sizes.length - 1]} RUs (×${sizes[sizes.length - 1]! / sizes[0]!} RUs). Target: p50 < 50 µs at R = 8, flat in cluster size.
`;
const paths = writeResults('decision-cost', { machine: machine(), load: LOAD, rows }, md, resultsDir(quick, 'decision-cost'));
process.stdout.write(`\nwrote ${paths.join(', ')}\n`);
