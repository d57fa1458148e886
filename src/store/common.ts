/**
 * Rules both stores enforce before a transaction reaches the key space, so that a request that
 * etcd would refuse is refused by the MemoryStore too, with the same code.
 */
import { TarcilError, invalid } from '../util/errors.ts';
import type { Compare, KeyValue, Op, TxnRequest } from './types.ts';

/** etcd's default `--max-txn-ops`. A server setting: EtcdStore only mirrors it for callers. */
export const DEFAULT_MAX_TXN_OPS = 128;
/** etcd's default `--max-request-bytes` (1.5 MiB). Also a server setting. */
export const DEFAULT_MAX_REQUEST_BYTES = 1.5 * 1024 * 1024;

/**
 * Orders keys as etcd does: by their UTF-8 bytes. JavaScript's `<` compares UTF-16 code units,
 * which disagrees with byte order only when a surrogate (a character above U+FFFF) meets a
 * character in U+E000..U+FFFF, so that one case is remapped.
 */
export function compareKeys(a: string, b: string): number {
  if (a === b) return 0;
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    let ca = a.charCodeAt(i);
    let cb = b.charCodeAt(i);
    if (ca === cb) continue;
    if (ca >= 0xd800 && cb >= 0xd800) {
      ca = ca >= 0xe000 ? ca - 0x800 : ca + 0x2000;
      cb = cb >= 0xe000 ? cb - 0x800 : cb + 0x2000;
    }
    return ca - cb;
  }
  return a.length - b.length;
}

/**
 * etcd's range end for a prefix: the prefix with its last byte below 0xff incremented and what
 * follows dropped; `\0` (to the end of the key space) when there is no such byte.
 */
export function prefixRangeEnd(prefix: Buffer): Buffer {
  const end = Buffer.from(prefix);
  for (let i = end.length - 1; i >= 0; i--) {
    const byte = end[i];
    if (byte !== undefined && byte < 0xff) {
      end[i] = byte + 1;
      return end.subarray(0, i + 1);
    }
  }
  return Buffer.from([0]);
}

export function checkKey(key: string, where: string): void {
  if (typeof key !== 'string' || key.length === 0) throw invalid(where, 'key must be a non-empty string');
}

/** etcd lease ids are int64 written in decimal; '0' means no lease. */
export function normalizeLease(lease: string | undefined, where: string): string {
  if (lease === undefined || lease === '' || lease === '0') return '0';
  if (!/^-?\d+$/.test(lease)) throw invalid(where, `lease id must be a decimal integer, got "${lease}"`);
  return BigInt(lease).toString();
}

/**
 * A generous estimate of the request's protobuf size: what etcd compares with
 * `--max-request-bytes`. Only the strings matter at the sizes where the limit bites.
 */
export function requestBytes(req: TxnRequest): number {
  let n = 0;
  for (const c of req.compare) n += Buffer.byteLength(c.key) + (typeof c.value === 'string' ? Buffer.byteLength(c.value) : 0) + 16;
  for (const op of [...req.success, ...(req.failure ?? [])]) n += opBytes(op);
  return n;
}

function opBytes(op: Op): number {
  return Buffer.byteLength(op.key) + (op.type === 'put' ? Buffer.byteLength(op.value) + 24 : 8) + 8;
}

export function tooLarge(bytes: number, max: number): TarcilError {
  return new TarcilError('TOO_MANY_OPS', `request is too large: about ${bytes} bytes, the store accepts ${max}`, {
    details: { limit: 'maxRequestBytes', bytes, max },
  });
}

/**
 * etcd's checks on a transaction's shape: at most maxOps compares and maxOps ops per branch
 * (TOO_MANY_OPS), non-empty keys, no key put twice or both put and deleted in one branch.
 */
export function checkTxn(req: TxnRequest, maxOps: number, maxBytes: number): void {
  if (!Array.isArray(req.compare) || !Array.isArray(req.success)) {
    throw invalid('txn', 'compare and success must be arrays');
  }
  const failure = req.failure ?? [];
  const worst = Math.max(req.compare.length, req.success.length, failure.length);
  if (worst > maxOps) {
    throw new TarcilError('TOO_MANY_OPS', `too many operations in txn request: ${worst} in one list, the store accepts ${maxOps}`, {
      details: { limit: 'maxTxnOps', ops: worst, max: maxOps, compare: req.compare.length, success: req.success.length, failure: failure.length },
    });
  }
  for (const c of req.compare) checkCompare(c);
  checkBranch(req.success, 'txn.success');
  checkBranch(failure, 'txn.failure');
  const bytes = requestBytes(req);
  if (bytes > maxBytes) throw tooLarge(bytes, maxBytes);
}

/**
 * etcd's checks on independent transactions nested in one request (ClusterStore.txns): at most
 * maxOps of them, each within maxOps − their number per list, no key written by two of them, and
 * the whole request within maxBytes.
 */
export function checkTxns(reqs: TxnRequest[], maxOps: number, maxBytes: number): void {
  if (!Array.isArray(reqs) || reqs.length === 0) throw invalid('txns', 'must be a non-empty array of transactions');
  if (reqs.length > maxOps) {
    throw new TarcilError('TOO_MANY_OPS', `too many operations in txn request: ${reqs.length} nested transactions, the store accepts ${maxOps}`, {
      details: { limit: 'maxTxnOps', ops: reqs.length, max: maxOps },
    });
  }
  let bytes = 0;
  const writers = new Map<string, number>();
  const prefixDeletes: Array<{ key: string; owner: number }> = [];
  reqs.forEach((r, i) => {
    checkTxn(r, maxOps - reqs.length, Infinity);
    bytes += requestBytes(r);
    for (const op of [...r.success, ...(r.failure ?? [])]) {
      if (op.type === 'get') continue;
      if (op.type === 'delete' && op.prefix === true) {
        prefixDeletes.push({ key: op.key, owner: i });
        continue;
      }
      const other = writers.get(op.key);
      if (other !== undefined && other !== i) throw invalid('txns', `duplicate key given in txn request: ${op.key}`);
      writers.set(op.key, i);
    }
  });
  for (const d of prefixDeletes) {
    for (const [key, owner] of writers) {
      if (owner !== d.owner && key.startsWith(d.key)) throw invalid('txns', `duplicate key given in txn request: ${key}`);
    }
  }
  if (bytes > maxBytes) throw tooLarge(bytes, maxBytes);
}

const OPS = new Set(['==', '!=', '<', '>']);

function checkCompare(c: Compare): void {
  checkKey(c.key, 'txn.compare.key');
  if (!OPS.has(c.op)) throw invalid('txn.compare.op', `unknown operator "${String(c.op)}"`);
  switch (c.target) {
    case 'mod':
    case 'create':
    case 'version':
      if (!Number.isSafeInteger(c.value)) throw invalid('txn.compare.value', `${c.target} must be an integer`);
      return;
    case 'value':
    case 'lease':
      if (c.op !== '==' && c.op !== '!=') throw invalid('txn.compare.op', `${c.target} compares only with == or !=`);
      if (typeof c.value !== 'string') throw invalid('txn.compare.value', `${c.target} must be a string`);
      if (c.target === 'lease') normalizeLease(c.value, 'txn.compare.value');
      return;
    default:
      throw invalid('txn.compare.target', `unknown target "${String((c as { target: unknown }).target)}"`);
  }
}

function checkBranch(ops: Op[], where: string): void {
  const deletes: Array<{ key: string; prefix: boolean }> = [];
  for (const op of ops) {
    if (op.type === 'delete') deletes.push({ key: op.key, prefix: op.prefix === true });
    if (op.type === 'put' || op.prefix !== true) checkKey(op.key, `${where}.key`);
    if (op.type === 'put') {
      if (typeof op.value !== 'string') throw invalid(`${where}.value`, 'value must be a string');
      normalizeLease(op.lease, `${where}.lease`);
    }
  }
  const puts = new Set<string>();
  for (const op of ops) {
    if (op.type !== 'put') continue;
    const clash = puts.has(op.key) || deletes.some((d) => (d.prefix ? op.key.startsWith(d.key) : d.key === op.key));
    if (clash) throw invalid(where, `duplicate key given in txn request: ${op.key}`);
    puts.add(op.key);
  }
}

/**
 * One compare against the key as it is (undefined: missing), with etcd's rules: a missing key has
 * revisions, version 0 and lease '0'; a value compare on a missing key is false for == and !=.
 */
export function evaluateCompare(c: Compare, kv: Pick<KeyValue, 'value' | 'lease' | 'modRevision' | 'createRevision' | 'version'> | undefined): boolean {
  switch (c.target) {
    case 'value':
      if (!kv) return false;
      return c.op === '==' ? kv.value === c.value : kv.value !== c.value;
    case 'lease': {
      const have = kv ? kv.lease : '0';
      const want = normalizeLease(c.value, 'txn.compare.value');
      return c.op === '==' ? have === want : have !== want;
    }
    case 'mod':
    case 'create':
    case 'version': {
      const have = !kv ? 0 : c.target === 'mod' ? kv.modRevision : c.target === 'create' ? kv.createRevision : kv.version;
      switch (c.op) {
        case '==':
          return have === c.value;
        case '!=':
          return have !== c.value;
        case '<':
          return have < c.value;
        case '>':
          return have > c.value;
      }
    }
  }
  return false;
}
