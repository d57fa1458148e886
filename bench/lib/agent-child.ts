/**
 * One scheduling agent in its own process, for benchmarks that run agents as they are deployed:
 * one process each, with its own etcd client and watch-fed cache. The parent passes the work as
 * JSON in argv[2]; the child connects, starts its agent, prints `ready`, waits for `go` on stdin,
 * places its jobs with a fixed number in flight, then prints one JSON line with what it measured.
 */
import { createInterface } from 'node:readline';
import { SchedulingAgent } from '../../src/agent/agent.ts';
import { openStore } from '../../src/store/index.ts';
import { Keys } from '../../src/state/keys.ts';
import { SystemClock } from '../../src/util/clock.ts';
import { createLogger } from '../../src/util/log.ts';
import { SeededRng } from '../../src/util/rng.ts';
import { benchJob } from './jobs.ts';

export interface AgentChildWork {
  url: string;
  prefix: string;
  id: string;
  seed: number;
  /** Job numbers this agent places. */
  jobs: number[];
  tasksPerJob: number;
  inFlight: number;
  groupCommit: number;
}

export interface AgentChildResult {
  id: string;
  tasks: number;
  /** Wall-clock epoch milliseconds (sub-millisecond) of the first submit and the last commit. */
  start: number;
  end: number;
  latenciesMs: number[];
  retries: number;
  conflicts: number;
  /** Requests sent to etcd to commit. */
  requests: number;
  /** CPU seconds this process used while placing. */
  cpuSeconds: number;
}

const work = JSON.parse(process.argv[2] ?? '{}') as AgentChildWork;
const store = await openStore(work.url);
const agent = new SchedulingAgent({
  id: work.id,
  store,
  keys: new Keys(work.prefix),
  clock: new SystemClock(),
  rng: new SeededRng(work.seed),
  log: createLogger('bench', 'silent'),
  config: { conflictScope: 'ru', groupCommit: work.groupCommit },
});
await agent.start();
process.stdout.write('ready\n');
const lines = createInterface({ input: process.stdin });
await new Promise<void>((resolve) => lines.once('line', () => resolve()));

const now = (): number => performance.timeOrigin + performance.now();
const latenciesMs: number[] = [];
let retries = 0;
let next = 0;
const cpu0 = process.cpuUsage();
const start = now();
const worker = async (): Promise<void> => {
  for (;;) {
    const n = work.jobs[next++];
    if (n === undefined) return;
    const job = benchJob(n, work.tasksPerJob);
    const s0 = now();
    const rec = await agent.schedule(job);
    latenciesMs.push(now() - s0);
    retries += rec.retries;
  }
};
await Promise.all(Array.from({ length: work.inFlight }, () => worker()));
const end = now();
const cpu = process.cpuUsage(cpu0);
const result: AgentChildResult = {
  id: work.id,
  tasks: work.jobs.length * work.tasksPerJob,
  start,
  end,
  latenciesMs,
  retries,
  conflicts: agent.stats.conflicts,
  requests: agent.groupCommitStats?.requests ?? agent.stats.commits,
  cpuSeconds: (cpu.user + cpu.system) / 1e6,
};
process.stdout.write(`${JSON.stringify(result)}\n`);
lines.close();
await agent.close();
await store.close();
