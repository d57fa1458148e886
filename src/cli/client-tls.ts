/** The client commands' TLS flags as the gRPC client takes them. */
import { invalid } from '../util/errors.ts';

/**
 * The TLS of a client command: `--tls-ca` to trust the front-end, with `--tls-cert` and
 * `--tls-key` (both or neither) to present a client certificate; undefined for plain text.
 */
export function clientTls(o: { tlsCa?: string; tlsCert?: string; tlsKey?: string }): { caFile?: string; certFile?: string; keyFile?: string } | undefined {
  if (o.tlsCert !== undefined && o.tlsKey === undefined) throw invalid('--tls-key', 'is needed with --tls-cert (a client certificate goes with its key)');
  if (o.tlsKey !== undefined && o.tlsCert === undefined) throw invalid('--tls-cert', 'is needed with --tls-key (a client certificate goes with its key)');
  if (o.tlsCa === undefined && o.tlsCert === undefined) return undefined;
  return { ...(o.tlsCa !== undefined ? { caFile: o.tlsCa } : {}), ...(o.tlsCert !== undefined ? { certFile: o.tlsCert, keyFile: o.tlsKey as string } : {}) };
}
