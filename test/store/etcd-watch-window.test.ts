/**
 * The watch connection's HTTP/2 flow-control window on a real etcd. etcd may send the watches only
 * as many bytes as this process has acknowledged room for; with the default 64 KiB, events
 * reached a process at 64 KiB per round trip to etcd (at a 1 s round trip, about 150 RU records a
 * second, whatever etcd could send). Here the proxy holds back everything the process sends to
 * etcd, window updates included, while etcd's answers still pass: every event of a burst well over
 * 64 KiB must still arrive.
 */
import { randomUUID } from 'node:crypto';
import { describe, expect, inject, it } from 'vitest';
import { EtcdStore } from '../../src/store/etcd.ts';
import { tcpProxy } from '../support/proxy.ts';
import { Recorder } from './contract.ts';

const endpoint = inject('etcdEndpoint');

describe('the etcd watch connection', () => {
  it('takes a burst of events well over 64 KiB without acknowledging any of it', async () => {
    const proxy = await tcpProxy(Number(new URL(endpoint).port));
    const watching = await EtcdStore.connect({ endpoints: [`http://127.0.0.1:${proxy.port}`], watchProbeMs: 0 });
    const direct = await EtcdStore.connect({ endpoints: [endpoint] });
    const rec = new Recorder();
    try {
      const p = `/tarcil-test/watch-window/${randomUUID()}/`;
      rec.handle = await watching.watch({ prefix: p, fromRevision: 0, onEvents: (b) => rec.batches.push(b), onError: (e) => rec.errors.push(e) });
      await direct.put(`${p}first`, '1');
      await rec.waitFor((b) => b.length >= 1);
      proxy.partition('to-server');
      // 512 KiB of events: 256 keys of 2 KiB, written directly (not through the proxy).
      const value = 'x'.repeat(2048);
      for (let i = 0; i < 256; i += 64) {
        await direct.txn({
          compare: [],
          success: Array.from({ length: 64 }, (_, j) => ({ type: 'put' as const, key: `${p}k${String(i + j).padStart(3, '0')}`, value })),
        });
      }
      const events = (): number => rec.batches.reduce((n, b) => n + b.events.length, 0);
      await rec.waitFor(() => events() >= 257, 10_000);
      expect(rec.errors).toEqual([]);
      expect(events()).toBe(257);
    } finally {
      proxy.heal();
      await rec.handle?.close();
      await watching.close();
      await direct.close();
      await proxy.close();
    }
  });
});
