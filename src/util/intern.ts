/**
 * One array per distinct numeric vector. Records parsed from the store each bring a fresh copy of
 * a task's caused vector; what is derived from a vector and kept by the array (a resident's
 * target, a server's neighbours' side for a newcomer: sampling/selection.ts) is then derived once
 * per workload instead of once per task, and such caches stay as small as the set of workloads.
 */
const VECTORS = 4096;
const vectors = new Map<string, readonly number[]>();

/** The shared array equal to `v` (`v` itself the first time it is seen). */
export function internVector(v: readonly number[]): readonly number[] {
  const key = v.join(',');
  const known = vectors.get(key);
  if (known) return known;
  // Bounded: a cell runs few distinct vectors (workloads, learned profiles); a flood of new ones
  // only costs the sharing.
  if (vectors.size >= VECTORS) vectors.clear();
  vectors.set(key, v);
  return v;
}
