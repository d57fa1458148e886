/**
 * The registry of the simulator's scheduling policies (tarcil and its rivals), by name.
 */
import type { CoreConfig } from '../../agent/core.ts';
import { DEFAULT_RUNTIME } from '../../agent/defaults.ts';
import type { Rng } from '../../util/rng.ts';
import type { World } from '../world.ts';
import { CentralizedPolicy } from './centralized.ts';
import { DelayPolicy } from './delay.ts';
import { PigeonPolicy } from './pigeon.ts';
import { OmniscientPolicy, SparrowPolicy } from './sparrow.ts';
import { OraclePolicy, type OracleOptions } from './oracle.ts';
import type { SimRuntimeOptions } from './runtime.ts';
import { TarcilPolicy } from './tarcil.ts';
import type { Policy, PolicyEnv } from './types.ts';

export type { Policy, PolicyEnv } from './types.ts';

export const POLICY_NAMES = [
  'tarcil',
  'fixed-R2',
  'fixed-R4',
  'fixed-R8',
  'fixed-R16',
  'fixed-R32',
  'fixed-R64',
  'sparrow',
  'sparrow-batch',
  'sparrow-per-task',
  'random',
  'omniscient',
  'centralized',
  'pigeon',
  'delay-fixed',
  'delay-dynamic',
  'oracle',
] as const;

export interface PolicySpec {
  name: string;
  agents?: number;
  /** Overrides of the scheduling core's configuration (tarcil and fixed-R only: ablations). */
  core?: Partial<CoreConfig>;
  /**
   * The run-time loop (tarcil and fixed-R only): block slow servers, move slow tasks, learn
   * profiles. Absent: the live default (defaultSimRuntime); `{}`: none.
   */
  runtime?: SimRuntimeOptions;
  /** Namespaces' weights for fair share (tarcil and fixed-R only). */
  weights?: Record<string, number>;
  /** Tarcil and fixed-R: see TarcilOptions.priorityWaits (false only as an ablation). */
  priorityWaits?: boolean;
  /** Tarcil and fixed-R: see TarcilOptions.preferReplicas (an ablation). */
  preferReplicas?: boolean;
  /** Tarcil and fixed-R: see TarcilOptions.packJobs (a design study). */
  packJobs?: boolean;
  /** Tarcil and fixed-R: see TarcilOptions.freshViews (an ablation). */
  freshViews?: boolean;
  /** Tarcil and fixed-R: every job's queue bound, ms (default: twice the job's ideal time, within [10 ms, 10 s]). */
  maxQueueMs?: number;
  /** The oracle only: what it may not know (OracleOptions; the ladder of bench/oracle-ladder.ts). */
  oracle?: OracleOptions;
}

/**
 * The run-time loop tarcil runs when a spec names none: the live agents' default parts
 * (DEFAULT_RUNTIME in src/agent/defaults.ts). `runtime: {}` runs none.
 */
export function defaultSimRuntime(): SimRuntimeOptions {
  const { block, learn, move } = DEFAULT_RUNTIME;
  return { ...(block ? { block } : {}), ...(learn ? { learn } : {}), ...(move ? { move } : {}) };
}

/** Builds a policy by name: `tarcil`, `fixed-R<n>`, `sparrow[-batch|-per-task]`, `random`, ... */
export function makePolicy(spec: PolicySpec, world: World, rng: Rng, env: PolicyEnv = {}): Policy {
  const n = spec.name;
  const agents = spec.agents ?? 10;
  const fixed = /^fixed-R(\d+)$/.exec(n);
  const runtime = spec.runtime ?? defaultSimRuntime();
  const core = {
    ...(spec.core ? { core: spec.core } : {}),
    runtime,
    ...(spec.weights ? { weights: spec.weights } : {}),
    ...(spec.priorityWaits === false ? { priorityWaits: false } : {}),
    ...(spec.preferReplicas ? { preferReplicas: true } : {}),
    ...(spec.freshViews ? { freshViews: true } : {}),
    ...(spec.packJobs ? { packJobs: true } : {}),
    ...(spec.maxQueueMs !== undefined ? { maxQueueMs: spec.maxQueueMs } : {}),
  };
  if (fixed) return new TarcilPolicy(world, rng, { agents, fixedR: Number(fixed[1]), ...core });
  switch (n) {
    case 'tarcil':
      return new TarcilPolicy(world, rng, { agents, ...core });
    case 'sparrow':
      return new SparrowPolicy(world, rng, { mode: 'batch-lb', cancel: true });
    case 'sparrow-nocancel':
      return new SparrowPolicy(world, rng, { mode: 'batch-lb', cancel: false });
    case 'sparrow-batch':
      return new SparrowPolicy(world, rng, { mode: 'batch' });
    case 'sparrow-per-task':
      return new SparrowPolicy(world, rng, { mode: 'per-task' });
    case 'random':
      return new SparrowPolicy(world, rng, { mode: 'random' });
    case 'omniscient':
      return new OmniscientPolicy(world, rng);
    case 'centralized':
      return new CentralizedPolicy(world, rng);
    case 'oracle':
      return new OraclePolicy(world, rng, spec.oracle);
    case 'pigeon':
      return new PigeonPolicy(world, rng, {
        shortCutoffMs: env.shortCutoffMs ?? 10_000,
        ...(env.reserved === undefined ? {} : { reserved: env.reserved }),
      });
    case 'delay-fixed':
      return new DelayPolicy(world, rng, { dynamic: false });
    case 'delay-dynamic':
      return new DelayPolicy(world, rng, { dynamic: true });
    default:
      throw new Error(`unknown policy '${n}' (known: ${POLICY_NAMES.join(', ')})`);
  }
}
