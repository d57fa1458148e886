import * as grpc from '@grpc/grpc-js';
import { describe, expect, it } from 'vitest';
import { deadlineExceeded, toStatus } from '../../src/rpc/grpc.ts';
import { errorMessage, invalid, isTransient, TarcilError } from '../../src/util/errors.ts';

describe('errorMessage', () => {
  it('gives an Error its message and anything else as text', () => {
    expect(errorMessage(new TarcilError('UNAVAILABLE', 'etcd is away'))).toBe('etcd is away');
    expect(errorMessage(new RangeError('too far'))).toBe('too far');
    expect(errorMessage('plain text')).toBe('plain text');
    expect(errorMessage({ code: 7 })).toBe('{"code":7}');
    expect(errorMessage(42)).toBe('42');
    expect(errorMessage(undefined)).toBe('undefined');
    expect(errorMessage(null)).toBe('null');
    expect(errorMessage(10n)).toBe('10');
    const cyclic: Record<string, unknown> = {};
    cyclic.self = cyclic;
    expect(errorMessage(cyclic)).toBe('[object Object]');
  });
});

describe('toStatus', () => {
  it('maps a deadline to DEADLINE_EXCEEDED, not UNAVAILABLE', () => {
    const st = toStatus(deadlineExceeded('the job was persisted'));
    expect(st.code).toBe(grpc.status.DEADLINE_EXCEEDED);
    expect(st.details).toBe('deadline exceeded before the job was persisted');
  });

  it('keeps ALREADY_EXISTS and the field of an invalid argument', () => {
    expect(toStatus(new TarcilError('ALREADY_EXISTS', 'job j1 exists already')).code).toBe(grpc.status.ALREADY_EXISTS);
    const st = toStatus(invalid('tasks', 'must be an integer in [1, 100000]'));
    expect(st.code).toBe(grpc.status.INVALID_ARGUMENT);
    expect(st.metadata?.get('tarcil-field')).toEqual(['tasks']);
  });

  it('sends a field naming any user key, and a message cut inside an emoji, as text a status can carry', () => {
    const key = 'ключ\u0001🙂%';
    const st = toStatus(invalid(`constraints.attributes.${key}`, `is not in the cell (got 'a${'🙂'.repeat(700)}')`));
    const field = st.metadata?.get('tarcil-field')[0] as string;
    expect(field).toMatch(/^[ -~]*$/);
    expect(decodeURIComponent(field)).toBe(`constraints.attributes.${key}`);
    // Cut at 1,024 code units: never half a surrogate pair (grpc-js could not send it).
    expect(st.details).not.toMatch(/[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/);
    expect(st.details).toMatch(/… \(message cut: \d+ characters in all\)$/);
    expect(() => encodeURI(st.details ?? '')).not.toThrow();
    const long = toStatus(invalid('x'.repeat(500), 'is wrong')).metadata?.get('tarcil-field')[0] as string;
    expect(long).toBe(`${'x'.repeat(200)}...`);
  });

  it('reports anything else as INTERNAL with its message', () => {
    expect(toStatus(new Error('boom'))).toMatchObject({ code: grpc.status.INTERNAL, details: 'boom' });
    expect(toStatus('bare string')).toMatchObject({ code: grpc.status.INTERNAL, details: 'bare string' });
  });
});

describe('isTransient', () => {
  it('is true for UNAVAILABLE and DEADLINE_EXCEEDED only', () => {
    expect(isTransient(new TarcilError('UNAVAILABLE', 'etcd is away'))).toBe(true);
    expect(isTransient(new TarcilError('DEADLINE_EXCEEDED', 'txn: etcdserver: request timed out'))).toBe(true);
    for (const code of ['COMPACTED', 'CANCELLED', 'LEASE_NOT_FOUND', 'CLOSED', 'INTERNAL', 'INVALID_ARGUMENT'] as const) {
      expect(isTransient(new TarcilError(code, code)), code).toBe(false);
    }
    expect(isTransient(new Error('UNAVAILABLE'))).toBe(false);
    expect(isTransient(undefined)).toBe(false);
  });
});
