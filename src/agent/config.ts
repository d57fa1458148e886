/**
 * The agent's options in one place: every knob of the scheduling agent and the attempt loop,
 * its default, and its validation (a bad value is refused with the field and the rule). The
 * live agents, the simulator's tarcil policy and the CLI's `--agent key=value` flags read them
 * from here. The defaults themselves are in defaults.ts, which loads no validation library: the
 * command line reads them for its help without loading zod.
 */
import { z } from 'zod';
import { toIssues } from '../model/schema.ts';
import { invalid } from '../util/errors.ts';
import { AGENT_OPTION_NAMES, DEFAULT_AGENT_CONFIG, type AgentConfig } from './defaults.ts';
import { WAIT_ORDERS } from './wait-order.ts';

export { AGENT_OPTION_NAMES, DEFAULT_AGENT_CONFIG, type AgentConfig, type ConflictScope } from './defaults.ts';

const int = (lo: number, hi: number) =>
  z
    .number({ error: `must be an integer in [${lo}, ${hi}]` })
    .int(`must be an integer in [${lo}, ${hi}]`)
    .min(lo, `must be an integer in [${lo}, ${hi}]`)
    .max(hi, `must be an integer in [${lo}, ${hi}]`);
const bool = z.boolean({ error: 'must be true or false' });

/** The rule of every option (what `--agent key=value` accepts). */
const SCHEMA = z
  .object({
    failProb: z.number({ error: 'must be a number in (0, 1)' }).gt(0, 'must be a number in (0, 1)').lt(1, 'must be a number in (0, 1)'),
    minR: int(1, 1024),
    capR: int(1, 1024),
    fixedR: int(1, 1024).optional(),
    qualityForm: z.enum(['monotone', 'paper'], { error: 'must be monotone or paper' }),
    platformWeight: z.number({ error: 'must be a number in [0, 10]' }).min(0, 'must be a number in [0, 10]').max(10, 'must be a number in [0, 10]'),
    admission: bool,
    bypassAbove: int(0, 999),
    preemption: bool,
    arbiterSample: int(0, 4096),
    twoSided: bool,
    neighbourWeight: z.number({ error: 'must be a number in [0, 1]' }).min(0, 'must be a number in [0, 1]').max(1, 'must be a number in [0, 1]'),
    fairShare: bool,
    admissionRule: z.enum(['own-bound', 'paper'], { error: 'must be own-bound or paper' }),
    waitOrder: z.enum(WAIT_ORDERS, { error: `must be ${WAIT_ORDERS.join(' or ')}` }),
    shortReserve: z.number({ error: 'must be a number in [0, 1)' }).min(0, 'must be a number in [0, 1)').lt(1, 'must be a number in [0, 1)'),
    longFactor: z.number({ error: 'must be a number in (0, 100]' }).gt(0, 'must be a number in (0, 100]').max(100, 'must be a number in (0, 100]'),
    conflictScope: z.enum(['ru', 'server'], { error: 'must be ru or server' }),
    maxRetries: int(0, 1000),
    backoffBaseMs: int(0, 60_000),
    backoffMaxMs: int(0, 600_000),
    buckets: int(1, 64),
    historyWindowMs: int(1000, 7 * 86_400_000),
    recheckMs: int(1, 600_000),
    recheckMaxMs: int(1, 600_000),
    consumeQueue: bool,
    recordJob: bool,
    groupCommit: int(0, 64),
    commitAhead: int(1, 64),
    handoffMs: int(0, 60_000),
    partitionBelow: z.number({ error: 'must be a number in [0, 1]' }).min(0, 'must be a number in [0, 1]').max(1, 'must be a number in [0, 1]'),
  })
  .strict()
  .refine((c) => c.minR <= c.capR, { message: 'must not exceed capR', path: ['minR'] })
  .refine((c) => c.backoffBaseMs <= c.backoffMaxMs, { message: 'must not exceed backoffMaxMs', path: ['backoffBaseMs'] });

/** Defaults overlaid with `over`, validated: throws INVALID_ARGUMENT naming the first bad field. */
export function agentConfig(over: Partial<AgentConfig> = {}): AgentConfig {
  const merged = { ...DEFAULT_AGENT_CONFIG, ...over };
  const res = SCHEMA.safeParse(merged);
  if (!res.success) {
    const first = toIssues(res.error.issues)[0];
    throw invalid(`agent.${first?.field ?? '?'}`, first?.rule ?? 'is invalid');
  }
  return merged;
}

/**
 * Parses `key=value` pairs (the CLI's repeatable `--agent` flag) into options: numbers and
 * booleans are read as such, the rest as strings; the result is validated by agentConfig().
 */
export function parseAgentOptions(pairs: readonly string[]): Partial<AgentConfig> {
  const out: Record<string, unknown> = {};
  for (const pair of pairs) {
    const eq = pair.indexOf('=');
    if (eq <= 0) throw invalid('agent', `"${pair}" must be key=value, with key one of ${AGENT_OPTION_NAMES.join(', ')}`);
    const key = pair.slice(0, eq);
    const raw = pair.slice(eq + 1);
    if (!AGENT_OPTION_NAMES.includes(key)) throw invalid(`agent.${key}`, `is not an agent option (one of ${AGENT_OPTION_NAMES.join(', ')})`);
    out[key] = raw === 'true' ? true : raw === 'false' ? false : raw.trim() !== '' && Number.isFinite(Number(raw)) ? Number(raw) : raw;
  }
  const partial = out as Partial<AgentConfig>;
  agentConfig(partial);
  return partial;
}
