/**
 * A small simulator workload for tests that follow a few jobs by hand: `servers` servers of `rus`
 * RUs each (one platform, speed 1, no interference), and the jobs given, each of one task per
 * entry of its `work` (ms on the best platform), arriving at its time.
 */
import type { ServerSpec, WorkloadProfile } from '../../src/model/types.ts';
import { SYNTHETIC, type Workload } from '../../src/sim/workloads.ts';
import { makeJob } from '../../src/sim/world.ts';

export interface CellJob {
  id: number;
  arrival: number;
  work: number[];
  profile?: WorkloadProfile;
  label?: string;
}

export function simCell(name: string, servers: number, rus: number, jobs: readonly CellJob[]): Workload {
  const specs: ServerSpec[] = Array.from({ length: servers }, (_, i) => ({ id: `s${i}`, platform: 'r3-2xlarge', rack: 'r0', rus, speed: 1, attributes: {} }));
  return {
    name,
    servers: specs,
    interference: false,
    env: {},
    warmupMs: 0,
    offered: 0,
    *jobs() {
      for (const j of jobs)
        yield makeJob({ id: j.id, profile: j.profile ?? SYNTHETIC, arrival: j.arrival, work: j.work, maxPerf: 1, label: j.label ?? `job ${j.id}` });
    },
  };
}
