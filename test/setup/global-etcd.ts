import type { TestProject } from 'vitest/node';
import { ensureEtcd, startEtcd } from '../support/etcd.ts';

declare module 'vitest' {
  export interface ProvidedContext {
    etcdEndpoint: string;
  }
}

/**
 * One private etcd for the whole run: found on the PATH or installed from Debian, started on a
 * free port with a temporary data dir, stopped and removed at the end. Tests isolate themselves
 * with a unique key prefix. Tests that need an etcd of their own (restarts, compaction
 * settings) call startEtcd() directly.
 */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const say = (m: string): void => {
    process.stdout.write(`[test setup] ${m}\n`);
  };
  const bin = ensureEtcd(say);
  const etcd = await startEtcd({ bin });
  say(`started a private etcd (${bin}) at ${etcd.endpoint}, data in ${etcd.dataDir}`);
  process.env.TARCIL_TEST_ETCD_BIN = bin;
  project.provide('etcdEndpoint', etcd.endpoint);
  return async () => {
    await etcd.stop();
    say('stopped the private etcd and removed its data dir');
  };
}
