/**
 * The registry of simulator experiments (`tarcil bench <name>`): each returns flat rows (CSV),
 * tables, charts and the paper's figure to compare against, with a quick and a full size; the
 * full one is what bench/results holds.
 */
import type { Runner } from './common.ts';
import type { ExperimentName } from './names.ts';
import { agentsExp, durationExp, loadExp, prioritiesExp, sampleSize } from './tarcil-w1.ts';
import { compare, w2LoadExp } from './compare.ts';
import { ablation, qualityExp, robustnessExp, uniformity } from './quality.ts';
import { pigeonExp, sparrowExp } from './rivals.ts';
import { calibrateExp, speed } from './model.ts';
import { mechanisms, mechanismsError } from './mechanisms.ts';
import { simSpeed } from './sim-speed.ts';
import { fairshareExp } from './fairshare.ts';
import { truthsExp } from './truths.ts';
import { traceExp } from './trace.ts';
import { worstJob } from './worst-job.ts';

export type { ExperimentContext, ExperimentResult, Table } from './common.ts';

export { EXPERIMENT_NAMES, type ExperimentName } from './names.ts';

/** Every experiment of names.ts, and only those (`satisfies` checks both ways). */
const REGISTRY = {
  'sample-size': sampleSize,
  agents: agentsExp,
  load: loadExp,
  duration: durationExp,
  compare,
  'w2-load': w2LoadExp,
  priorities: prioritiesExp,
  robustness: robustnessExp,
  quality: qualityExp,
  ablation,
  mechanisms,
  'mechanisms-error': mechanismsError,
  uniformity,
  sparrow: sparrowExp,
  pigeon: pigeonExp,
  calibrate: calibrateExp,
  speed,
  'sim-speed': simSpeed,
  fairshare: fairshareExp,
  truths: truthsExp,
  trace: traceExp,
  'worst-job': worstJob,
} satisfies Record<ExperimentName, Runner>;

export const EXPERIMENTS: Record<string, Runner> = REGISTRY;
