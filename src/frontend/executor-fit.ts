/**
 * Whether the cell's nodes can run a job as its spec asks, checked at submission. Each node's
 * server record names the executor its monitor runs (`executor`: simulated or process). The
 * process executor runs each task's `command` and fails a task without one; the simulated executor
 * runs nothing, holding each task's RU for its modelled duration. So: a spec without a command in
 * a cell whose every node runs the process executor is refused (INVALID_ARGUMENT naming
 * `command`); a command in a cell where some node runs the simulated executor, or no command where
 * some node runs the process executor, is accepted with a warning (SubmitJobResponse.warnings, and
 * `explain`). A cell with no registered node, or whose records do not say, is not judged.
 */
import type { JobSpec } from '../model/types.ts';
import type { LiveServerRecord } from '../state/live-records.ts';
import type { Clock } from '../util/clock.ts';
import { invalid } from '../util/errors.ts';

/** How many registered servers run each executor (records that name none are `unknown`). */
export interface ExecutorMix {
  simulated: number;
  process: number;
  unknown: number;
}

export function executorMix(servers: Iterable<LiveServerRecord>): ExecutorMix {
  const mix: ExecutorMix = { simulated: 0, process: 0, unknown: 0 };
  for (const s of servers) {
    if (s.executor === 'simulated') mix.simulated++;
    else if (s.executor === 'process') mix.process++;
    else mix.unknown++;
  }
  return mix;
}

const servers = (n: number): string => `${n} server${n === 1 ? '' : 's'}`;

/**
 * The warnings for a job of this spec in a cell of this mix, oldest rule first; throws
 * INVALID_ARGUMENT (field `command`) when no node of the cell could run it.
 */
export function executorWarnings(spec: Pick<JobSpec, 'command'>, mix: ExecutorMix): string[] {
  const known = mix.simulated + mix.process;
  if (known === 0) return [];
  const all = known + mix.unknown;
  if (spec.command === undefined) {
    if (mix.process === all) {
      throw invalid(
        'command',
        `is required in this cell: its ${mix.process === 1 ? 'one server runs' : `${servers(mix.process)} all run`} the process executor, which runs each task's command and fails a task without one (give "command": {"argv": [...]})`,
        { processServers: mix.process },
      );
    }
    if (mix.process > 0)
      return [
        `command: none given, and ${mix.process} of this cell's ${servers(all)} run the process executor: a task placed on one of them fails (it has no command to run)`,
      ];
    return [];
  }
  if (mix.simulated === all) {
    return [
      `command: not run in this cell: its ${mix.simulated === 1 ? 'one server runs' : `${servers(mix.simulated)} all run`} the simulated executor, which holds each task's RU for its modelled duration (durationMs) and runs nothing (\`tarcil up --executor process\` runs commands)`,
    ];
  }
  if (mix.simulated > 0)
    return [`command: ${mix.simulated} of this cell's ${servers(all)} run the simulated executor: a task placed on one of them does not run its command`];
  return [];
}

/** How long a counted mix is used before the servers are counted again (a cell of 10,000 nodes: a few hundred µs a count). */
const MIX_TTL_MS = 1000;

/**
 * The executor mix of the servers a front-end follows (JobManager.servers), counted again when the
 * number of servers changed or MIX_TTL_MS after the last count.
 */
export class CellExecutors {
  private mix: ExecutorMix | undefined;
  private at = -Infinity;
  private size = -1;

  constructor(
    private readonly servers: ReadonlyMap<string, LiveServerRecord>,
    private readonly clock: Clock,
  ) {}

  now(): ExecutorMix {
    const t = this.clock.now();
    if (this.mix === undefined || this.servers.size !== this.size || t - this.at >= MIX_TTL_MS) {
      this.mix = executorMix(this.servers.values());
      this.at = t;
      this.size = this.servers.size;
    }
    return this.mix;
  }

  /** executorWarnings over the mix now (throws INVALID_ARGUMENT when no node could run it). */
  check(spec: Pick<JobSpec, 'command'>): string[] {
    return executorWarnings(spec, this.now());
  }

  /** For a job already stored (`explain`): the warnings, or why no node of the cell can run it now. */
  notes(spec: Pick<JobSpec, 'command'>): string[] {
    try {
      return this.check(spec);
    } catch (err) {
      return [err instanceof Error ? err.message : String(err)];
    }
  }
}
