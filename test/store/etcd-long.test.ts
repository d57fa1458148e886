import { createRequire } from 'node:module';
import { describe, expect, inject, it } from 'vitest';
import { installFastLongToString, longToDecimal } from '../../src/store/etcd-long.ts';
import { openStore } from '../../src/store/index.ts';

const Long = createRequire(import.meta.url)('long') as {
  fromString(s: string, unsigned?: boolean): { high: number; low: number; unsigned: boolean; toString(radix?: number): string };
};

/** Values around every boundary the conversion has: zero, 2^32, 2^53, the ends of the range. */
const SIGNED = [
  '0',
  '1',
  '-1',
  '42',
  '4294967295',
  '4294967296',
  '-4294967296',
  '9007199254740991',
  '9007199254740992',
  '-9007199254740992',
  '-9007199254740993',
  '9223372036854775807',
  '-9223372036854775808',
  '7587869542127693824',
  '-123456789012345678',
];
const UNSIGNED = ['0', '9007199254740991', '9007199254740992', '18446744073709551615', '14841639068965178418'];

describe('64-bit values from etcd in base 10', () => {
  it.each(SIGNED)('signed %s', (v) => {
    const l = Long.fromString(v, false);
    expect(longToDecimal(l.high, l.low, false)).toBe(v);
  });
  it.each(UNSIGNED)('unsigned %s', (v) => {
    const l = Long.fromString(v, true);
    expect(longToDecimal(l.high, l.low, true)).toBe(v);
  });

  it('installs on the long.js protobufjs uses, base 10 only', () => {
    installFastLongToString();
    installFastLongToString();
    for (const v of SIGNED) expect(Long.fromString(v, false).toString()).toBe(v);
    expect(Long.fromString('-255', false).toString(16)).toBe('-ff');
    expect(Long.fromString('18446744073709551615', true).toString(2)).toBe('1'.repeat(64));
  });

  it('leaves revisions and lease ids read from a real etcd as etcd gave them', async () => {
    const store = await openStore(inject('etcdEndpoint').replace('http://', 'etcd://'));
    try {
      const lease = await store.grantLease(30);
      await store.put('/long-test/a', 'x', { lease: lease.id });
      const kv = await store.get('/long-test/a');
      const r = await store.range('/long-test/');
      expect(kv?.lease).toBe(lease.id);
      expect(BigInt(lease.id) > 0n).toBe(true);
      expect(kv?.modRevision).toBeGreaterThan(0);
      expect(r.revision).toBeGreaterThanOrEqual(kv?.modRevision ?? Infinity);
      // The id read back names the lease to etcd: revoking it deletes the key.
      await lease.revoke();
      expect(await store.get('/long-test/a')).toBeUndefined();
    } finally {
      await store.close();
    }
  });
});
