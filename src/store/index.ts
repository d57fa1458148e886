/**
 * The store layer's public surface: the ClusterStore interface, the embedded MemoryStore, the
 * EtcdStore and their limits.
 */
import type { Clock } from '../util/clock.ts';
import { TarcilError } from '../util/errors.ts';
import { EtcdStore, type EtcdTlsOptions } from './etcd.ts';
import { MemoryStore } from './memory.ts';
import type { ClusterStore } from './types.ts';

export type * from './types.ts';
export { MemoryStore, DEFAULT_HISTORY_LIMIT, type MemoryStoreOptions } from './memory.ts';
export { EtcdStore, DEFAULT_REQUEST_TIMEOUT_MS, type EtcdStoreOptions, type EtcdTlsOptions } from './etcd.ts';
export { DEFAULT_MAX_REQUEST_BYTES, DEFAULT_MAX_TXN_OPS } from './common.ts';

export interface OpenStoreOptions {
  /** The flag the URL came from, named in errors. Default '--store'. */
  flag?: string;
  /** MemoryStore: the clock driving lease expiry (the simulator passes its ManualClock). */
  clock?: Clock;
  /** MemoryStore: revisions of watch history kept. */
  historyLimit?: number;
  /** Both: the transaction limits (for etcd, mirror the server's --max-txn-ops / --max-request-bytes). */
  maxTxnOps?: number;
  maxRequestBytes?: number;
  /** etcds://: CA, client certificate and key files. */
  tls?: EtcdTlsOptions;
  /** etcd: credentials, also accepted in the URL as etcd://user:password@host:port. */
  auth?: { user: string; password: string };
  dialTimeoutMs?: number;
  /** etcd: deadline of each call (default DEFAULT_REQUEST_TIMEOUT_MS, 2 s). */
  requestTimeoutMs?: number;
}

const USAGE = 'expected memory://, etcd://host:port[,host:port...] or etcds://host:port[,...] (TLS)';

/**
 * Opens the store a `--store` URL names:
 *   memory://                      the embedded MemoryStore (single process)
 *   etcd://h1:2379[,h2:2379,...]   etcd over plain gRPC (port defaults to 2379)
 *   etcds://h1:2379[,...]          etcd over TLS (opts.tls for CA and client certificates)
 * An etcd store is returned once etcd answers (within opts.dialTimeoutMs), so a wrong address
 * fails here with UNAVAILABLE (DEADLINE_EXCEEDED if something accepts the connection but does not
 * answer) rather than at the first scheduling decision.
 */
export async function openStore(url: string, opts: OpenStoreOptions = {}): Promise<ClusterStore> {
  const flag = opts.flag ?? '--store';
  const bad = (why: string): TarcilError =>
    new TarcilError('INVALID_ARGUMENT', `${flag}: "${url}" is not a store URL (${why}); ${USAGE}`, { field: flag, details: { value: url } });
  const m = /^([a-z]+):\/\/(.*)$/i.exec(url.trim());
  if (!m) throw bad('no scheme');
  const scheme = (m[1] ?? '').toLowerCase();
  const rest = m[2] ?? '';
  if (scheme === 'memory') {
    if (rest !== '' && rest !== '/') throw bad('memory:// takes no address');
    return new MemoryStore({
      ...(opts.clock ? { clock: opts.clock } : {}),
      ...(opts.historyLimit !== undefined ? { historyLimit: opts.historyLimit } : {}),
      ...(opts.maxTxnOps !== undefined ? { maxTxnOps: opts.maxTxnOps } : {}),
      ...(opts.maxRequestBytes !== undefined ? { maxRequestBytes: opts.maxRequestBytes } : {}),
    });
  }
  if (scheme !== 'etcd' && scheme !== 'etcds') throw bad(`unknown scheme "${scheme}"`);
  const secure = scheme === 'etcds';

  let hostPart = rest.replace(/\/+$/, '');
  let auth = opts.auth;
  const at = hostPart.lastIndexOf('@');
  if (at >= 0) {
    const userinfo = hostPart.slice(0, at);
    hostPart = hostPart.slice(at + 1);
    const colon = userinfo.indexOf(':');
    if (colon <= 0) throw bad('credentials must be user:password');
    auth = { user: decodeURIComponent(userinfo.slice(0, colon)), password: decodeURIComponent(userinfo.slice(colon + 1)) };
  }
  if (hostPart === '') throw bad('no host');
  const endpoints = hostPart.split(',').map((h) => {
    const hp = parseHostPort(h.trim());
    if (!hp) throw bad(`"${h}" is not host:port`);
    return `${secure ? 'https' : 'http'}://${hp}`;
  });

  return EtcdStore.connect({
    endpoints,
    ...(secure ? { tls: opts.tls ?? {} } : {}),
    ...(auth ? { auth } : {}),
    ...(opts.dialTimeoutMs !== undefined ? { dialTimeoutMs: opts.dialTimeoutMs } : {}),
    ...(opts.requestTimeoutMs !== undefined ? { requestTimeoutMs: opts.requestTimeoutMs } : {}),
    ...(opts.maxTxnOps !== undefined ? { maxTxnOps: opts.maxTxnOps } : {}),
    ...(opts.maxRequestBytes !== undefined ? { maxRequestBytes: opts.maxRequestBytes } : {}),
  });
}

/** `host`, `host:port` or `[v6]:port`; the port defaults to etcd's 2379. */
function parseHostPort(s: string): string | undefined {
  const m = /^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9._-]+)(?::(\d{1,5}))?$/.exec(s);
  if (!m) return undefined;
  const port = m[2] === undefined ? 2379 : Number(m[2]);
  if (port < 1 || port > 65535) return undefined;
  return `${m[1] ?? ''}:${port}`;
}
