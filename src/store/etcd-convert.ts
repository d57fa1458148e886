/**
 * Conversions between the ClusterStore types and etcd3's (keys, compares, ops, errors, TLS).
 */
import { readFileSync } from 'node:fs';
import { rootCertificates } from 'node:tls';
import { isBrokenCircuitError } from 'cockatiel';
import {
  ClientClosedError,
  CompareResult,
  CompareTarget,
  EtcdAuthenticationFailedError,
  EtcdInvalidAuthTokenError,
  EtcdLeaseInvalidError,
  EtcdPermissionDeniedError,
  GRPCCancelledError,
  GRPCDeadlineExceededError,
  GRPCInvalidArgumentError,
  GRPCUnavailableError,
  type ICompare,
  type IKeyValue,
  type IOptions,
  type IRequestOp,
  type IResponseOp,
} from 'etcd3';
import { errorMessage, TarcilError, invalid } from '../util/errors.ts';
import { rootLogger } from '../util/log.ts';
import { normalizeLease, prefixRangeEnd } from './common.ts';
import type { Compare, KeyValue, Op } from './types.ts';

export interface EtcdTlsOptions {
  /** CA bundle that signed the server certificates; the system roots when omitted. */
  caFile?: string;
  /** Client certificate and key, for etcd's --client-cert-auth. */
  certFile?: string;
  keyFile?: string;
}

export const log = rootLogger.child({ component: 'etcd-store' });
export const ALL_KEYS = Buffer.from([0]);
export const RESULT: Record<Compare['op'], CompareResult> = {
  '==': CompareResult.Equal,
  '!=': CompareResult.NotEqual,
  '<': CompareResult.Less,
  '>': CompareResult.Greater,
};
/** How long close() waits for etcd to confirm a watch cancellation before giving up on it. */
export const WATCH_CANCEL_WAIT_MS = 2000;
/** Margin after a lease's TTL before asking etcd whether it expired (keepAlive: false). */
export const LEASE_CHECK_SLACK_MS = 250;

export function runCallback(cb: (err: Error) => void, err: Error): void {
  try {
    cb(err);
  } catch (e) {
    log.error({ err: e }, 'lease onLost callback threw');
  }
}

export function prefixRange(prefix: string): [Buffer, Buffer] {
  // etcd has no empty key: the whole key space is ['\0', '\0').
  if (prefix === '') return [ALL_KEYS, ALL_KEYS];
  const key = Buffer.from(prefix);
  return [key, prefixRangeEnd(key)];
}

export function fromKv(kv: IKeyValue): KeyValue {
  return {
    key: kv.key.toString(),
    value: kv.value.toString(),
    createRevision: Number(kv.create_revision),
    modRevision: Number(kv.mod_revision),
    version: Number(kv.version),
    lease: kv.lease === '' ? '0' : kv.lease,
  };
}

export function toCompare(c: Compare): ICompare {
  const key = Buffer.from(c.key);
  const result = RESULT[c.op];
  switch (c.target) {
    case 'mod':
      return { key, result, target: CompareTarget.Mod, mod_revision: c.value };
    case 'create':
      return { key, result, target: CompareTarget.Create, create_revision: c.value };
    case 'version':
      return { key, result, target: CompareTarget.Version, version: c.value };
    case 'value':
      return { key, result, target: CompareTarget.Value, value: Buffer.from(c.value) };
    case 'lease':
      return { key, result, target: CompareTarget.Lease, lease: normalizeLease(c.value, 'txn.compare.value') };
  }
}

/** The keys read by each 'get' of a branch etcd ran; null for its puts and deletes. */
export function branchResponses(ops: Op[], responses: IResponseOp[]): Array<KeyValue[] | null> {
  return ops.map((op, i): KeyValue[] | null => {
    if (op.type !== 'get') return null;
    const r = responses[i]?.response_range;
    return r ? r.kvs.map(fromKv) : [];
  });
}

export function toRequestOp(op: Op): IRequestOp {
  switch (op.type) {
    case 'get': {
      const [key, end] = op.prefix === true ? prefixRange(op.key) : [Buffer.from(op.key), undefined];
      return { request_range: { key, ...(end ? { range_end: end } : {}) } };
    }
    case 'put': {
      const lease = normalizeLease(op.lease, 'txn.put.lease');
      return { request_put: { key: Buffer.from(op.key), value: Buffer.from(op.value), ...(lease !== '0' ? { lease } : {}) } };
    }
    case 'delete': {
      const [key, end] = op.prefix === true ? prefixRange(op.key) : [Buffer.from(op.key), undefined];
      return { request_delete_range: { key, ...(end ? { range_end: end } : {}) } };
    }
  }
}

export function loadTls(tls: EtcdTlsOptions): NonNullable<IOptions['credentials']> {
  const read = (file: string, field: string): Buffer => {
    try {
      return readFileSync(file);
    } catch (err) {
      throw new TarcilError('INVALID_ARGUMENT', `${field}: cannot read ${file}`, { cause: err, field });
    }
  };
  if ((tls.certFile === undefined) !== (tls.keyFile === undefined)) {
    throw invalid('tls', 'certFile and keyFile go together');
  }
  return {
    rootCertificate: tls.caFile ? read(tls.caFile, 'tls.caFile') : Buffer.from(rootCertificates.join('\n')),
    ...(tls.keyFile ? { privateKey: read(tls.keyFile, 'tls.keyFile') } : {}),
    ...(tls.certFile ? { certChain: read(tls.certFile, 'tls.certFile') } : {}),
  };
}

/** Maps etcd3 and gRPC errors onto the project's stable codes. */
export function toTarcil(err: unknown, what: string): TarcilError {
  if (err instanceof TarcilError) return err;
  const e = err instanceof Error ? err : new Error(errorMessage(err));
  const m = e.message;
  const make = (code: TarcilError['code'], details?: Record<string, unknown>): TarcilError =>
    new TarcilError(code, `${what}: ${m}`, details ? { cause: e, details } : { cause: e });
  if (/too many operations in txn request/.test(m)) return make('TOO_MANY_OPS', { limit: 'maxTxnOps' });
  if (/request is too large|larger than max/.test(m)) return make('TOO_MANY_OPS', { limit: 'maxRequestBytes' });
  if (/required revision has been compacted/.test(m)) return make('COMPACTED');
  if (/required revision is a future revision|duplicate key given in txn request|key is not provided/.test(m)) {
    return make('INVALID_ARGUMENT');
  }
  if (e instanceof EtcdLeaseInvalidError || /requested lease not found/.test(m)) return make('LEASE_NOT_FOUND');
  if (e instanceof ClientClosedError) return make('CLOSED');
  if (e instanceof EtcdPermissionDeniedError || e instanceof EtcdAuthenticationFailedError || e instanceof EtcdInvalidAuthTokenError) {
    return new TarcilError('INVALID_ARGUMENT', `${what}: ${m}`, { cause: e, field: 'store.auth' });
  }
  // A deadline: the call's own (requestTimeoutMs), or etcd's "request timed out" (its server-side
  // limit, sent with gRPC code UNAVAILABLE, hence tested first). The request may have been applied.
  if (e instanceof GRPCDeadlineExceededError || /request timed out|deadline exceeded/i.test(m)) return make('DEADLINE_EXCEEDED');
  if (
    e instanceof GRPCUnavailableError ||
    e instanceof GRPCCancelledError ||
    isBrokenCircuitError(e) ||
    /no leader|leader changed|timed out|connection|ECONNREFUSED|unavailable/i.test(m)
  ) {
    return make('UNAVAILABLE');
  }
  if (e instanceof GRPCInvalidArgumentError) return make('INVALID_ARGUMENT');
  return make('INTERNAL');
}

/**
 * True when the error proves etcd never received the request: the endpoint's circuit breaker
 * refused the call, or no connection to the endpoint could be established. Such a call, a write
 * too, can be sent to another endpoint without any risk of applying it twice.
 */
export function neverSent(err: unknown): boolean {
  if (isBrokenCircuitError(err)) return true;
  const m = err instanceof Error ? err.message : '';
  return /No connection established|ECONNREFUSED/.test(m);
}

/** Consecutive failures that open an endpoint's circuit (for 1 s: calls skip it meanwhile). */
export const BREAKER_FAILURES = 3;

/**
 * Runs of a call that etcd never received, with several endpoints: etcd3 picks an endpoint at
 * random for each run, and skips one whose circuit is open, so a dead endpoint can take at most
 * BREAKER_FAILURES runs before it is skipped. With one endpoint, trying again is pointless.
 */
export function unsentAttempts(endpoints: number): number {
  return endpoints > 1 ? BREAKER_FAILURES * endpoints + 1 : 1;
}

/**
 * Runs of a stream call etcd never received (a keepalive on request). Its refusal comes after the
 * circuit breaker let the call through, so the breaker does not count it and never skips the dead
 * endpoint: each run picks an endpoint at random. With two endpoints, one of them dead, these runs
 * all miss the live one with a chance of 2^-30.
 */
export function unsentStreamAttempts(endpoints: number): number {
  return endpoints > 1 ? 30 * (endpoints - 1) : 1;
}

/**
 * Runs `fn`, and again (up to `attempts` runs in all, see {@link unsentAttempts}) while it fails in
 * a way that proves etcd never received the request ({@link neverSent}). Such failures are
 * immediate, so there is no pause. Any other error is thrown as it came.
 */
export async function unlessSent<T>(attempts: number, fn: () => Promise<T>, closed: () => boolean = () => false): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await fn();
    } catch (err) {
      if (!neverSent(err) || attempt >= attempts || closed()) throw err;
    }
  }
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => {
    setTimeout(resolve, ms).unref();
  });
}
