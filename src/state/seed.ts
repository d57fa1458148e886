/**
 * Writes a cluster's servers and RUs into the store (demo cells, benchmarks, tests): what node
 * monitors register for themselves in a live cell.
 */
import type { ServerSpec } from '../model/types.ts';
import type { Keys } from './keys.ts';
import type { ClusterStore, Op } from '../store/types.ts';
import { FREE_RU_VALUE, type ServerRecord } from './records.ts';

/**
 * Writes servers, their RUs (free) and epochs, in as few transactions as the store's op limit
 * allows. Only keys that do not exist yet are created, so re-seeding never frees a busy RU.
 * Used by `tarcil demo`, the simulator harness and tests; live nodes register through their
 * local monitor instead.
 */
export async function seedCluster(store: ClusterStore, keys: Keys, servers: readonly ServerSpec[]): Promise<number> {
  let written = 0;
  let batch: { key: string; value: string }[] = [];
  const flush = async (): Promise<void> => {
    if (batch.length === 0) return;
    const res = await store.txn({
      compare: batch.map((b) => ({ key: b.key, target: 'version' as const, op: '==' as const, value: 0 })),
      success: batch.map((b): Op => ({ type: 'put', key: b.key, value: b.value })),
    });
    if (!res.succeeded) {
      // Some keys exist already: write the missing ones one by one.
      for (const b of batch) {
        const r = await store.txn({
          compare: [{ key: b.key, target: 'version', op: '==', value: 0 }],
          success: [{ type: 'put', key: b.key, value: b.value }],
        });
        if (r.succeeded) written++;
      }
    } else {
      written += batch.length;
    }
    batch = [];
  };
  const limit = Math.max(1, store.maxTxnOps);
  for (const s of servers) {
    const rec: ServerRecord = { ...s, state: 'up' };
    const entries = [
      { key: keys.server(s.id), value: JSON.stringify(rec) },
      { key: keys.epoch(s.id), value: 'seed' },
    ];
    for (let i = 0; i < s.rus; i++) entries.push({ key: keys.ru({ server: s.id, index: i }), value: FREE_RU_VALUE });
    if (batch.length + entries.length > limit) await flush();
    batch.push(...entries);
  }
  await flush();
  return written;
}

/** A homogeneous cluster (tests, benchmarks): n servers of `rus` RUs, `perRack` per rack. */
export function uniformServers(n: number, rus: number, platform = 'r3-2xlarge', perRack = 20): ServerSpec[] {
  return Array.from({ length: n }, (_, i) => ({
    id: `s${String(i).padStart(4, '0')}`,
    platform,
    rack: `r${String(Math.floor(i / perRack)).padStart(3, '0')}`,
    rus,
    speed: 1,
    attributes: {},
  }));
}
