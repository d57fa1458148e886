/**
 * A CPU profile in pprof's format (what etcd serves on /debug/pprof/profile with --enable-pprof),
 * summed by function: the self time and the total time (the function or anything it called) of
 * the heaviest ones, and the time by package, as shares of all samples.
 */
import { gunzipSync } from 'node:zlib';
import { Profile } from 'pprof-format';

export interface PprofTop {
  /** Seconds of CPU in the profile. */
  cpuSeconds: number;
  /** Wall seconds the profile covers. */
  durationSeconds: number;
  byFunction: { name: string; self: number; total: number }[];
  /** Self time by Go package (the function name up to its last path element's first dot). */
  byPackage: { name: string; self: number }[];
}

export function pprofTop(gz: Uint8Array, limit = 40): PprofTop {
  const p = Profile.decode(gunzipSync(gz));
  const str = (i: number | bigint): string => p.stringTable.strings[Number(i)] ?? '?';
  const fnName = new Map<string, string>();
  for (const f of p.function) fnName.set(String(f.id), str(f.name));
  const locFns = new Map<string, string[]>();
  for (const l of p.location)
    locFns.set(
      String(l.id),
      l.line.map((ln) => fnName.get(String(ln.functionId)) ?? '?'),
    );
  // The CPU value is the sample type whose unit is nanoseconds (pprof: [samples/count, cpu/nanoseconds]).
  const vi = Math.max(
    0,
    p.sampleType.findIndex((t) => str(t.unit) === 'nanoseconds'),
  );
  const self = new Map<string, number>();
  const total = new Map<string, number>();
  let all = 0;
  for (const s of p.sample) {
    const v = Number(s.value[vi] ?? 0);
    all += v;
    const stack = s.locationId.flatMap((id) => locFns.get(String(id)) ?? []);
    const leaf = stack[0];
    if (leaf !== undefined) self.set(leaf, (self.get(leaf) ?? 0) + v);
    for (const f of new Set(stack)) total.set(f, (total.get(f) ?? 0) + v);
  }
  const share = (v: number): number => (all > 0 ? v / all : 0);
  const byFunction = [...total.entries()]
    .map(([name, t]) => ({ name, self: share(self.get(name) ?? 0), total: share(t) }))
    .sort((a, b) => b.total - a.total)
    .slice(0, limit);
  const pkg = new Map<string, number>();
  for (const [name, v] of self) {
    const slash = name.lastIndexOf('/');
    const dot = name.indexOf('.', slash + 1);
    const k = dot > 0 ? name.slice(0, dot) : name;
    pkg.set(k, (pkg.get(k) ?? 0) + v);
  }
  const byPackage = [...pkg.entries()]
    .map(([name, v]) => ({ name, self: share(v) }))
    .sort((a, b) => b.self - a.self)
    .slice(0, limit);
  return { cpuSeconds: all / 1e9, durationSeconds: Number(p.durationNanos) / 1e9, byFunction, byPackage };
}

/** The summary as text: totals, then the heaviest functions and packages in percent. */
export function pprofTopText(t: PprofTop): string {
  const pc = (x: number): string => `${(100 * x).toFixed(1).padStart(5)}%`;
  return [
    `${t.cpuSeconds.toFixed(1)} s of CPU in ${t.durationSeconds.toFixed(0)} s (${(t.cpuSeconds / Math.max(1e-9, t.durationSeconds)).toFixed(2)} cores)`,
    '',
    'total  self   function',
    ...t.byFunction.map((f) => `${pc(f.total)} ${pc(f.self)}  ${f.name}`),
    '',
    'self   package',
    ...t.byPackage.map((f) => `${pc(f.self)}  ${f.name}`),
  ].join('\n');
}
