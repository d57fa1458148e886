/**
 * The audit trail: one record per call that changes something (accepted or refused), written to
 * the store under `audit/<time>-<id>` and as a structured line on the `audit` logger. The elected
 * housekeeper deletes records older than the retention period (`--retain`, state/retention.ts).
 */
import { randomBytes } from 'node:crypto';
import type { Keys } from '../state/keys.ts';
import type { ClusterStore, Op } from '../store/types.ts';
import { errorMessage, invalid } from '../util/errors.ts';
import type { Logger } from '../util/log.ts';

export interface AuditRecord {
  at: number;
  id: string;
  /** `token:<accessor> (<name>)`, `cert:<common name>`, `anonymous` (ACLs off) or `unauthenticated`. */
  who: string;
  accessor?: string;
  peer: string;
  rpc: string;
  namespace?: string;
  /** The job, node, namespace or token accessor the call was about. */
  target?: string;
  /** `ok` or the error code. */
  result: string;
  message?: string;
}

export const DEFAULT_AUDIT_LIMIT = 1000;

/** The record with its id: what is stored and logged. */
export function auditEntry(rec: Omit<AuditRecord, 'id'>): AuditRecord {
  return { ...rec, id: randomBytes(4).toString('hex') };
}

/** The record as a write: for a call whose own transaction carries it (SubmitJob's submission). */
export function auditPut(keys: Keys, full: AuditRecord): Op & { type: 'put' } {
  return { type: 'put', key: keys.audit(full.at, full.id), value: JSON.stringify(full) };
}

/** The record on the `audit` logger (warn for a refused or failed call). */
export function logAudit(log: Logger, full: AuditRecord): void {
  const level = full.result === 'ok' ? 'info' : 'warn';
  log[level]({ audit: full }, `${full.rpc} by ${full.who}: ${full.result}`);
}

/** Writes the record and logs it; a failed write is logged, never thrown (the call's own answer stands). */
export async function writeAudit(store: ClusterStore, keys: Keys, log: Logger, rec: Omit<AuditRecord, 'id'>): Promise<AuditRecord> {
  const full = auditEntry(rec);
  logAudit(log, full);
  try {
    const put = auditPut(keys, full);
    await store.put(put.key, put.value);
  } catch (e) {
    log.error({ err: errorMessage(e), audit: full }, 'audit record not written');
  }
  return full;
}

/** The time in an audit key (`audit/<16-digit ms>-<id>`), or undefined. */
export function auditKeyTime(keys: Keys, key: string): number | undefined {
  const tail = keys.tail(keys.audits(), key);
  const m = tail === undefined ? null : /^(\d{16})-/.exec(tail);
  return m ? Number(m[1]) : undefined;
}

/** Records at or after `since`, of `namespace` when given, the newest `limit`, oldest first; and how many matched before the limit cut them. */
export async function listAudit(
  store: ClusterStore,
  keys: Keys,
  f: { since?: number; namespace?: string; limit?: number },
): Promise<{ records: AuditRecord[]; total: number }> {
  const limit = f.limit || DEFAULT_AUDIT_LIMIT;
  if (!Number.isInteger(limit) || limit < 0 || limit > 100_000) throw invalid('limit', 'must be an integer in [0, 100000] (0: 1,000)');
  if (f.since !== undefined && (!Number.isFinite(f.since) || f.since < 0)) throw invalid('since_ms', 'must be a time in ms since the epoch, or 0');
  const out: AuditRecord[] = [];
  for (const kv of (await store.range(keys.audits())).kvs) {
    const at = auditKeyTime(keys, kv.key);
    if (at === undefined || (f.since !== undefined && at < f.since)) continue;
    let rec: AuditRecord;
    try {
      rec = JSON.parse(kv.value) as AuditRecord;
    } catch {
      continue;
    }
    if (f.namespace && rec.namespace !== f.namespace) continue;
    out.push(rec);
  }
  return { records: out.slice(Math.max(0, out.length - limit)), total: out.length };
}
