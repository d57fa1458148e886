/** The `tenants` workload: namespaces sharing a cell, for fair share (`tarcil bench fairshare`). */
import { SeededRng } from '../util/rng.ts';
import { exp, homogeneous, profile, type Workload } from './workloads.ts';
import { makeJob } from './world.ts';

/** One namespace's stream of jobs in `tenants`. */
export interface TenantStream {
  namespace: string;
  /** Offered load, as a share of the cell's RUs (work of its tasks at the best platform speed). */
  load: number;
  /** Submits from this time to that (ms). */
  fromMs: number;
  toMs: number;
}

export interface TenantsOptions {
  /** Servers of r3-xlarge (4 RUs each). */
  servers: number;
  streams: TenantStream[];
  /** Tasks per job, and each task's work (ms, exponential with this mean). */
  tasksPerJob: number;
  taskMs: number;
}

/**
 * Namespaces sharing a cell (fair share, `tarcil bench fairshare`): each stream submits jobs of
 * `tasksPerJob` spark-lr tasks at Poisson arrivals for its load, labelled with its namespace;
 * job ids are numbered across streams.
 */
export function tenants(o: TenantsOptions): Workload {
  const servers = homogeneous('r3-xlarge', o.servers, 40);
  const nRu = servers.reduce((n, s) => n + s.rus, 0);
  const p = profile('spark-lr');
  return {
    name: `tenants ${o.streams.map((s) => `${s.namespace}=${s.load}`).join(' ')}`,
    servers,
    interference: true,
    env: {},
    warmupMs: 0,
    offered: o.streams.reduce((n, s) => n + s.load, 0),
    utilEvery: 1000,
    *jobs(world, rng) {
      const maxPerf = world.maxPerf(p);
      // Each stream draws from its own generator, seeded by the run and its namespace's name: a
      // stream submits the same jobs whatever the other streams are (B alone and B with A).
      const base = rng.int(2 ** 30);
      const next = o.streams.map((s) => {
        let h = base;
        for (const ch of s.namespace) h = (Math.imul(h, 31) + ch.charCodeAt(0)) | 0;
        return { s, rng: new SeededRng(h), gap: (o.tasksPerJob * o.taskMs) / maxPerf / (s.load * nRu), t: s.fromMs };
      });
      for (const n of next) n.t += exp(n.rng, n.gap);
      let id = 0;
      for (;;) {
        let best: (typeof next)[number] | undefined;
        for (const n of next) if (n.t < n.s.toMs && (!best || n.t < best.t)) best = n;
        if (!best) return;
        const r = best.rng;
        const work = Array.from({ length: o.tasksPerJob }, () => exp(r, o.taskMs));
        yield makeJob({ id: ++id, profile: p, arrival: best.t, work, maxPerf, label: best.s.namespace, namespace: best.s.namespace });
        best.t += exp(r, best.gap);
      }
    },
  };
}
