/**
 * How EtcdStore names etcd's and gRPC's errors: a deadline (the call's own, or etcd's "request
 * timed out") is DEADLINE_EXCEEDED, an endpoint that cannot be reached UNAVAILABLE, and only a
 * call refused before it left counts as never sent.
 */
import { BrokenCircuitError } from 'cockatiel';
import { GRPCDeadlineExceededError, GRPCUnavailableError, EtcdLeaseInvalidError } from 'etcd3';
import { describe, expect, it } from 'vitest';
import { neverSent, toTarcil } from '../../src/store/etcd-convert.ts';
import { isTransient } from '../../src/util/errors.ts';

describe('toTarcil', () => {
  it('names every kind of deadline DEADLINE_EXCEEDED', () => {
    const cases = [
      new GRPCDeadlineExceededError('4 DEADLINE_EXCEEDED: Deadline exceeded after 2.001s,remote_addr=127.0.0.1:2379'),
      // etcd's own server-side timeout, sent with gRPC code UNAVAILABLE.
      new GRPCUnavailableError('14 UNAVAILABLE: etcdserver: request timed out'),
      new GRPCUnavailableError('14 UNAVAILABLE: etcdserver: request timed out, possibly due to previous leader failure'),
      new GRPCUnavailableError('14 UNAVAILABLE: etcdserver: request timed out, possibly due to connection lost'),
    ];
    for (const err of cases) {
      const e = toTarcil(err, 'txn');
      expect(e.code, err.message).toBe('DEADLINE_EXCEEDED');
      expect(e.message).toBe(`txn: ${err.message}`);
      expect(isTransient(e)).toBe(true);
    }
  });

  it('keeps UNAVAILABLE for an endpoint that cannot be reached or has no leader', () => {
    const cases = [
      new GRPCUnavailableError('14 UNAVAILABLE: No connection established. Last error: Error: connect ECONNREFUSED 127.0.0.1:2379'),
      new GRPCUnavailableError('14 UNAVAILABLE: Connection dropped'),
      new GRPCUnavailableError('14 UNAVAILABLE: etcdserver: leader changed'),
      new GRPCUnavailableError('14 UNAVAILABLE: etcdserver: no leader'),
      new BrokenCircuitError(),
    ];
    for (const err of cases) expect(toTarcil(err, 'put').code, err.message).toBe('UNAVAILABLE');
    expect(toTarcil(new EtcdLeaseInvalidError('7'), 'keepalive').code).toBe('LEASE_NOT_FOUND');
  });
});

describe('neverSent', () => {
  it('is true only when the request provably did not leave', () => {
    expect(neverSent(new BrokenCircuitError())).toBe(true);
    expect(neverSent(new GRPCUnavailableError('14 UNAVAILABLE: No connection established. Last error: Error: connect ECONNREFUSED 127.0.0.1:2379'))).toBe(true);
    // Sent, then lost: the outcome is unknown.
    expect(neverSent(new GRPCUnavailableError('14 UNAVAILABLE: Connection dropped'))).toBe(false);
    expect(neverSent(new GRPCDeadlineExceededError('4 DEADLINE_EXCEEDED: Deadline exceeded'))).toBe(false);
    expect(neverSent(new GRPCUnavailableError('14 UNAVAILABLE: etcdserver: request timed out'))).toBe(false);
  });
});
