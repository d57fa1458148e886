/**
 * The names of the simulator experiments (`tarcil bench <name>`), in a module of their own so
 * that the command line lists them without loading the simulator. The registry (index.ts) is
 * checked against this list when it compiles: no name without an experiment, none left out.
 */
export const EXPERIMENT_NAMES = [
  'sample-size',
  'agents',
  'load',
  'duration',
  'compare',
  'w2-load',
  'priorities',
  'robustness',
  'quality',
  'ablation',
  'mechanisms',
  'mechanisms-error',
  'uniformity',
  'sparrow',
  'pigeon',
  'calibrate',
  'speed',
  'sim-speed',
  'fairshare',
  'truths',
  'trace',
  'worst-job',
] as const;

export type ExperimentName = (typeof EXPERIMENT_NAMES)[number];
