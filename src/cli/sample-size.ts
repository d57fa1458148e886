/**
 * `tarcil sample-size`: R from the x^R guarantee, and what it guarantees.
 */
import { guarantee, samplesForFraction, samplesForGoodOfPopulation, samplesForQuantile } from '../sampling/size.ts';
import { invalid } from '../util/errors.ts';

export interface SampleSizeArgs {
  quantile?: number;
  good?: number;
  population?: number;
  fraction?: number;
  failProb: number;
  cap: number;
  json: boolean;
}

/** `tarcil sample-size`: R = ceil(ln p / ln(1 − f)) and what it guarantees. */
export function sampleSizeCommand(a: SampleSizeArgs): string {
  let f: number;
  let what: string;
  let R: number;
  if (a.good !== undefined || a.population !== undefined) {
    if (a.good === undefined || a.population === undefined) throw invalid('--good/--population', 'must be given together');
    if (a.good > a.population) throw invalid('--good', `must not exceed --population (${a.population})`);
    f = a.good / a.population;
    R = samplesForGoodOfPopulation(a.good, a.population, a.failProb);
    what = `${a.good} acceptable of ${a.population} RUs (x = ${(1 - f).toFixed(4)})`;
  } else if (a.fraction !== undefined) {
    f = a.fraction;
    R = samplesForFraction(f, a.failProb);
    what = `${(f * 100).toFixed(2)}% of the population acceptable`;
  } else {
    const x = a.quantile ?? 0.8;
    f = 1 - x;
    R = samplesForQuantile(x, a.failProb);
    what = `best of R above the ${x} quality quantile`;
  }
  const x = 1 - f;
  const achieved = guarantee(R, x);
  const capped = Math.min(R, a.cap);
  if (a.json) {
    return `${JSON.stringify({ R, x, failProb: a.failProb, achieved, cap: a.cap, capped, cappedFailProb: guarantee(capped, x) })}\n`;
  }
  const lines = [
    `target: ${what}, miss probability ≤ ${a.failProb}`,
    `R = ceil(ln ${a.failProb} / ln ${x.toFixed(4)}) = ${R}`,
    `guarantee: P[no acceptable candidate among ${R}] = ${x.toFixed(4)}^${R} = ${achieved.toExponential(2)}`,
  ];
  if (R > a.cap) {
    lines.push(
      `agents cap R at ${a.cap}: with R = ${a.cap} the miss probability is ${guarantee(a.cap, x).toExponential(2)}; past the cap, admission control decides between waiting and placing now`,
    );
  }
  return `${lines.join('\n')}\n`;
}
