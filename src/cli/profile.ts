/**
 * `tarcil profile`: a profile's target quality, the order its resources are judged in and its
 * acceptable LSH buckets on a loaded cluster.
 */
import Table from 'cli-table3';
import { tableStyle } from './color.ts';
import { AdmissionCounters } from '../admission/index.ts';
import { wireAdmission } from '../agent/core.ts';
import { expandCluster, loadCatalog, resolveCluster, resolveProfile } from '../model/catalog.ts';
import { encodingToBigInt, jobTarget, scoreRu } from '../quality/index.ts';
import { RuIndex } from '../sampling/ru-index.ts';
import { sampleSize } from '../sampling/size.ts';
import { ManualClock } from '../util/clock.ts';
import { SeededRng } from '../util/rng.ts';

export interface ProfileArgs {
  cluster: string;
  load: number;
  seed: number;
  buckets: number;
  json: boolean;
}

/**
 * `tarcil profile`: what the scheduler makes of a workload profile: T_W (exact digits and the
 * double), the resource order it is judged in, and — on a cluster carrying a random resident load
 * drawn from the catalog — which LSH buckets are acceptable to it, f, and the sample size.
 */
export function profileCommand(name: string, a: ProfileArgs): string {
  const catalog = loadCatalog();
  const profile = resolveProfile(name, catalog);
  const target = jobTarget(profile.caused);
  const spec = resolveCluster(a.cluster, catalog);
  const servers = expandCluster(spec, catalog.platforms);
  const state = new RuIndex();
  const admission = new AdmissionCounters({ buckets: a.buckets, clock: new ManualClock(), seed: 0x7a3c11 });
  wireAdmission(state, admission);
  const rng = new SeededRng(a.seed);
  const residents = [...catalog.workloads.values()];
  state.batch(() => {
    for (const s of servers) state.upsertServer(s);
    for (const s of state.servers.values()) {
      for (let i = 0; i < s.ruCount; i++) {
        if (rng.next() >= a.load) continue;
        const r = residents[rng.int(residents.length)]!;
        state.setRu({ server: s.id, index: i }, { job: r.name, task: i, caused: r.caused, priority: 100, state: 'busy' }, 1);
      }
    }
  });
  const est = admission.estimateF(target);
  const size = sampleSize(est.f, { failProb: 0.01 });
  const names = catalog.resources;
  const order = target.order.map((i) => ({
    resource: names[i]?.id ?? String(i),
    caused: profile.caused[i] ?? 0,
    tolerance: 99 - (profile.caused[i] ?? 0),
  }));
  const snap = admission.snapshot();
  const acceptable = new Set(admission.acceptableBuckets(target));
  const exactDigits = encodingToBigInt(target.enc).toString().padStart(20, '0');
  if (a.json) {
    return `${JSON.stringify({ profile: profile.name, T: target.T, exact: `0.${exactDigits} / 0.99999999999999999999`, order, cluster: spec.name, load: a.load, f: est.f, acceptableFree: est.acceptableFree, totalFree: est.totalFree, R: size.R, buckets: snap.map((b, i) => ({ ...b, acceptable: acceptable.has(i) })) })}\n`;
  }
  const lines: string[] = [];
  lines.push(`profile ${profile.name} (${profile.family}): ${profile.description}`);
  lines.push(`T_W = ${target.T.toFixed(6)}  (exact: ${exactDigits} / (10^20 − 1); the double keeps ~16 digits)`);
  lines.push(`judged on its resources in this order (most sensitive first):`);
  lines.push(`  ${order.map((o) => `${o.resource} c=${o.caused} t=${o.tolerance}`).join(', ')}`);
  lines.push('');
  lines.push(`on ${spec.name} (${servers.length} servers) with ${Math.round(a.load * 100)}% resident load (seed ${a.seed}):`);
  lines.push(
    `  ${est.acceptableFree} of ${est.totalFree} free RUs are in buckets acceptable to it: f = ${est.f.toFixed(3)} → R = ${size.R}${size.capped ? ' (capped)' : ''}`,
  );
  const t = new Table({ style: tableStyle(), head: ['bucket', 'band', 'free', 'RUs', 'mean contention (job order, top 3)', 'acceptable'] });
  snap.forEach((b, i) => {
    if (b.total === 0) return;
    const mean = b.mean
      ? target.order
          .slice(0, 3)
          .map((r) => (b.mean as number[])[r]?.toFixed(0))
          .join('/')
      : '-';
    const ok = b.mean ? scoreRu(b.mean, target).acceptable : false;
    t.push([String(i), String(b.band ?? ''), String(b.free), String(b.total), mean, acceptable.has(i) ? 'yes' : ok ? 'yes (no free)' : 'no']);
  });
  lines.push(t.toString());
  return `${lines.join('\n')}\n`;
}
