/**
 * An urgent transaction (a placement commit) on a real etcd, with one request in flight at a
 * time: it is sent ahead of the writes already waiting for the slot, not after them, and its
 * outcome is the same as if it had waited.
 */
import { randomUUID } from 'node:crypto';
import { describe, expect, inject, it } from 'vitest';
import { EtcdStore } from '../../src/store/etcd.ts';

const endpoint = inject('etcdEndpoint');

describe('EtcdStore: urgent transactions', () => {
  it('sends an urgent transaction ahead of the writes waiting for a slot', async () => {
    const store = await EtcdStore.connect({ endpoints: [endpoint], inFlight: { initial: 1, min: 1, max: 1 } });
    try {
      const p = `/tarcil-test/urgent/${randomUUID()}/`;
      const done: string[] = [];
      const writes = Array.from({ length: 12 }, (_, i) => store.put(`${p}w${i}`, String(i)).then(() => done.push(`w${i}`)));
      // Queued after all twelve (one is in flight, eleven wait).
      const urgent = store
        .txn({ compare: [{ key: `${p}u`, target: 'version', op: '==', value: 0 }], success: [{ type: 'put', key: `${p}u`, value: 'u' }], urgent: true })
        .then((r) => {
          done.push('u');
          return r;
        });
      const plain = store
        .txn({ compare: [{ key: `${p}v`, target: 'version', op: '==', value: 0 }], success: [{ type: 'put', key: `${p}v`, value: 'v' }] })
        .then(() => done.push('v'));
      const [res] = await Promise.all([urgent, plain, ...writes]);
      expect(res.succeeded).toBe(true);
      expect(await store.get(`${p}u`)).toMatchObject({ value: 'u' });
      // The urgent one right after the write that held the slot; the plain one last, in order.
      expect(done.indexOf('u')).toBe(1);
      expect(done[done.length - 1]).toBe('v');
      expect(done.filter((d) => d.startsWith('w'))).toEqual(Array.from({ length: 12 }, (_, i) => `w${i}`));
    } finally {
      await store.close();
    }
  });
});
