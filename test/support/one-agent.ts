/**
 * One scheduling agent with its own shared view on a real etcd, over a fresh key prefix seeded with
 * `servers` servers of `rus` RUs each: for tests of what an agent does with the jobs that wait for
 * freed RUs (the wait order, the short-task reserve). The returned `close` stops it all.
 */
import { inject } from 'vitest';
import { SchedulingAgent } from '../../src/agent/agent.ts';
import { agentConfig, type AgentConfig } from '../../src/agent/config.ts';
import { SharedView } from '../../src/agent/shared-view.ts';
import { Keys } from '../../src/state/keys.ts';
import { seedCluster, uniformServers } from '../../src/state/seed.ts';
import { openStore } from '../../src/store/index.ts';
import type { ClusterStore } from '../../src/store/types.ts';
import { SystemClock } from '../../src/util/clock.ts';
import { createLogger } from '../../src/util/log.ts';
import { SeededRng } from '../../src/util/rng.ts';

export interface OneAgent {
  store: ClusterStore;
  keys: Keys;
  view: SharedView;
  agent: SchedulingAgent;
  close: () => Promise<void>;
}

export async function oneAgent(name: string, servers: number, rus: number, over: Partial<AgentConfig>, seed = 3): Promise<OneAgent> {
  const clock = new SystemClock();
  const log = createLogger('test', 'silent');
  const store = await openStore(inject('etcdEndpoint').replace('http://', 'etcd://'));
  const keys = new Keys(`/${name}-${Date.now()}/`);
  await seedCluster(store, keys, uniformServers(servers, rus));
  const cfg = agentConfig(over);
  const view = new SharedView({ store, keys, clock, log, config: cfg });
  const agent = new SchedulingAgent({ id: 'a0', store, keys, clock, rng: new SeededRng(seed), log, config: cfg, view });
  await agent.start();
  return {
    store,
    keys,
    view,
    agent,
    close: async () => {
      await agent.close();
      await view.close();
      await store.close();
    },
  };
}
