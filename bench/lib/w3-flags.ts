// The flags the W3 benches under several truths share (admission-holds.ts, reserve-loads.ts):
// the truths by name, the seed, the jobs, and the mean gaps between arrivals, checked.
import type { Truth } from '../../src/model/perf.ts';
import { TRUTHS } from '../../src/sim/experiments/truths.ts';

export interface W3Flags {
  truths: Truth[];
  seed: number;
  jobs: number;
  gaps: number[];
}

/** Reads `--truths` (names between commas), `--seed`, `--jobs` and `--gaps` (ms between commas); throws naming the flag. */
export function w3Flags(values: { truths: string; seed: string; jobs: string; gaps: string }): W3Flags {
  const truths = values.truths.split(',').map((name) => {
    const t = TRUTHS.find((x) => x.name === name.trim());
    if (!t) throw new Error(`--truths: no truth '${name}' (known: ${TRUTHS.map((x) => x.name).join(', ')})`);
    return t;
  });
  const seed = Number(values.seed);
  const jobs = Number(values.jobs);
  if (!Number.isInteger(seed) || seed < 1) throw new Error('--seed: must be a positive integer');
  if (!Number.isInteger(jobs) || jobs < 1) throw new Error('--jobs: must be a positive integer');
  const gaps = values.gaps.split(',').map(Number);
  if (gaps.some((g) => !Number.isFinite(g) || g <= 0)) throw new Error('--gaps: must be numbers > 0 (ms), between commas');
  return { truths, seed, jobs, gaps };
}
