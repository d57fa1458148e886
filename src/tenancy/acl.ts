/**
 * Access control: tokens, their policies, and the decision whether a policy allows a verb.
 *
 * A token is an accessor (16 hex digits, public: it names the token in listings, audit records
 * and `tarcil acl token revoke`) and a secret (32 random bytes, base64url). Clients send
 * `<accessor>.<secret>`; the store keeps `acl/tokens/<accessor>` with the SHA-256 of the secret,
 * never the secret, and the check compares hashes in constant time.
 *
 * A policy grants verbs per namespace (`submit`, `read`, `cancel`; the namespace `*` is every
 * namespace) and cluster verbs (`nodes`: cordon, drain, uncordon; `admin`: namespaces, tokens,
 * the audit trail; admin implies every other verb).
 */
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { z } from 'zod';
import { userRecord } from '../model/schema.ts';
import type { Keys } from '../state/keys.ts';
import type { ClusterStore } from '../store/types.ts';
import { own } from '../util/dict.ts';
import { invalid, TarcilError } from '../util/errors.ts';
import { namespaceProblem } from './namespace.ts';

export const NAMESPACE_VERBS = ['submit', 'read', 'cancel'] as const;
export const CLUSTER_VERBS = ['nodes', 'admin'] as const;
export type NamespaceVerb = (typeof NAMESPACE_VERBS)[number];
export type ClusterVerb = (typeof CLUSTER_VERBS)[number];
export type Verb = NamespaceVerb | ClusterVerb;

const namespaceKey = z.string().refine((s) => s === '*' || namespaceProblem(s) === undefined, { message: "must be a namespace name or '*'" });

/** Namespace → verbs; a key `__proto__` is refused (a policy must never mean less than its text says). */
const namespaceGrants = userRecord(namespaceKey, z.array(z.enum(NAMESPACE_VERBS)), 'must be an object mapping namespace names to lists of verbs');

export const PolicySchema = z
  .object({
    namespaces: namespaceGrants.default({}),
    cluster: z.array(z.enum(CLUSTER_VERBS)).default([]),
  })
  .strict();
export type Policy = z.infer<typeof PolicySchema>;

/** The admin policy (the bootstrap token's). */
export const ADMIN_POLICY: Policy = { namespaces: { '*': ['submit', 'read', 'cancel'] }, cluster: ['nodes', 'admin'] };

/** A policy from JSON text or a value, or INVALID_ARGUMENT naming the field and the rule (`policy.namespaces.team-a[0]: …`). */
export function parsePolicy(input: unknown, field = 'policy'): Policy {
  let value = input;
  if (typeof input === 'string') {
    try {
      value = JSON.parse(input) as unknown;
    } catch (e) {
      throw invalid(field, `must be valid JSON (${e instanceof Error ? e.message : String(e)})`);
    }
  }
  const r = PolicySchema.safeParse(value);
  if (r.success) return r.data;
  const issue = r.error.issues[0];
  const path = (issue?.path ?? []).map((p) => (typeof p === 'number' ? `[${p}]` : `.${String(p)}`)).join('');
  const msg =
    issue?.code === 'invalid_key'
      ? (issue.issues[0]?.message ?? 'is not a valid key')
      : issue?.code === 'invalid_value'
        ? `must be one of ${issue.values.map(String).join(', ')}`
        : issue?.code === 'unrecognized_keys'
          ? `unknown field(s) ${issue.keys.join(', ')}: a policy has namespaces and cluster`
          : (issue?.message ?? 'is invalid');
  throw invalid(`${field}${path}`, msg);
}

/**
 * Whether `policy` allows `verb` on namespace `ns` (undefined for a cluster verb). `ns` is what a
 * request says, unchecked: only the policy's own grants count, so a namespace called `constructor`
 * or `__proto__` is granted only by a policy that names it.
 */
export function allows(policy: Policy, verb: Verb, ns?: string): boolean {
  if (policy.cluster.includes('admin')) return true;
  if (verb === 'nodes' || verb === 'admin') return policy.cluster.includes(verb);
  if (ns === undefined) return false;
  return grants(policy, ns, verb) || grants(policy, '*', verb);
}

function grants(policy: Policy, ns: string, verb: NamespaceVerb): boolean {
  const verbs = own(policy.namespaces, ns);
  return Array.isArray(verbs) && verbs.includes(verb);
}

/** Whether `policy` allows `verb` on some namespace. */
export function allowsAny(policy: Policy, verb: NamespaceVerb): boolean {
  return policy.cluster.includes('admin') || Object.values(policy.namespaces).some((v) => v.includes(verb));
}

export interface TokenRecord {
  accessor: string;
  name: string;
  policy: Policy;
  /** SHA-256 of the secret, hex. */
  secretHash: string;
  createdAt: number;
  expiresAt?: number;
  revokedAt?: number;
  /** A verified client certificate with this common name and no token gets this token's policy. */
  certCommonName?: string;
}

const ACCESSOR_RE = /^[0-9a-f]{16}$/;
export const TOKEN_NAME_RULE = 'must be 1-100 characters of A-Z a-z 0-9 . _ @ : -';
const NAME_RE = /^[A-Za-z0-9._@:-]{1,100}$/;

export function requireAccessor(a: string, field = 'accessor'): string {
  if (!ACCESSOR_RE.test(a)) throw invalid(field, 'must be a token accessor (16 hex digits)');
  return a;
}

function sha256(s: string): Buffer {
  return createHash('sha256').update(s, 'utf8').digest();
}

/** A new token: its record (with the secret's hash) and what the client sends, `<accessor>.<secret>`. */
export function newToken(o: { name: string; policy: Policy; now: number; ttlMs?: number; certCommonName?: string }): { record: TokenRecord; secret: string } {
  if (!NAME_RE.test(o.name)) throw invalid('name', TOKEN_NAME_RULE);
  if (o.ttlMs !== undefined && (!Number.isFinite(o.ttlMs) || o.ttlMs < 0 || o.ttlMs > 10 * 365 * 86_400_000))
    throw invalid('ttl_ms', 'must be 0 (never expires) or a duration of at most 10 years');
  if (o.certCommonName !== undefined && (o.certCommonName.length > 200 || [...o.certCommonName].some((ch) => ch < ' ')))
    throw invalid('cert_common_name', 'must be at most 200 printable characters');
  const accessor = randomBytes(8).toString('hex');
  const raw = randomBytes(32).toString('base64url');
  const record: TokenRecord = {
    accessor,
    name: o.name,
    policy: o.policy,
    secretHash: sha256(raw).toString('hex'),
    createdAt: o.now,
    ...(o.ttlMs ? { expiresAt: o.now + o.ttlMs } : {}),
    ...(o.certCommonName ? { certCommonName: o.certCommonName } : {}),
  };
  return { record, secret: `${accessor}.${raw}` };
}

/** `<accessor>.<secret>` split, or undefined when the text is not of that shape. */
export function splitSecret(bearer: string): { accessor: string; raw: string } | undefined {
  const dot = bearer.indexOf('.');
  if (dot < 0) return undefined;
  const accessor = bearer.slice(0, dot);
  const raw = bearer.slice(dot + 1);
  if (!ACCESSOR_RE.test(accessor) || !/^[A-Za-z0-9_-]{1,200}$/.test(raw)) return undefined;
  return { accessor, raw };
}

/** Whether `raw` is the secret whose hash the record holds (constant time). */
export function secretMatches(rec: TokenRecord, raw: string): boolean {
  const want = Buffer.from(rec.secretHash, 'hex');
  const got = sha256(raw);
  return want.length === got.length && timingSafeEqual(want, got);
}

/** Why a stored token may not be used now, or undefined when it may. */
export function tokenUnusable(rec: TokenRecord, now: number): string | undefined {
  if (rec.revokedAt !== undefined) return `token ${rec.accessor} was revoked`;
  if (rec.expiresAt !== undefined && rec.expiresAt <= now) return `token ${rec.accessor} expired`;
  return undefined;
}

export function parseToken(value: string | undefined): TokenRecord | undefined {
  if (!value) return undefined;
  try {
    return JSON.parse(value) as TokenRecord;
  } catch {
    return undefined;
  }
}

export async function readToken(store: ClusterStore, keys: Keys, accessor: string): Promise<TokenRecord | undefined> {
  const r = await store.get(keys.token(accessor));
  return parseToken(r?.value);
}

export async function listTokens(store: ClusterStore, keys: Keys): Promise<TokenRecord[]> {
  return (await store.range(keys.tokens())).kvs.map((kv) => parseToken(kv.value)).filter((t): t is TokenRecord => !!t);
}

/**
 * The first admin token: `acl/bootstrapped` and the token in one transaction guarded by the
 * marker's absence, so two racing bootstraps create one token; the other gets FAILED_PRECONDITION.
 */
export async function bootstrap(store: ClusterStore, keys: Keys, name: string, now: number): Promise<{ record: TokenRecord; secret: string }> {
  const t = newToken({ name, policy: ADMIN_POLICY, now });
  const res = await store.txn({
    compare: [{ key: keys.aclBootstrapped(), target: 'version', op: '==', value: 0 }],
    success: [
      { type: 'put', key: keys.aclBootstrapped(), value: JSON.stringify({ at: now, accessor: t.record.accessor }) },
      { type: 'put', key: keys.token(t.record.accessor), value: JSON.stringify(t.record) },
    ],
  });
  if (!res.succeeded)
    throw new TarcilError('FAILED_PRECONDITION', 'ACLs were bootstrapped already: ask an admin token holder for a token (`tarcil acl token create`)');
  return t;
}

export async function createToken(
  store: ClusterStore,
  keys: Keys,
  o: { name: string; policy: Policy; now: number; ttlMs?: number; certCommonName?: string },
): Promise<{ record: TokenRecord; secret: string }> {
  const t = newToken(o);
  const res = await store.txn({
    compare: [{ key: keys.token(t.record.accessor), target: 'version', op: '==', value: 0 }],
    success: [{ type: 'put', key: keys.token(t.record.accessor), value: JSON.stringify(t.record) }],
  });
  if (!res.succeeded) throw new TarcilError('ABORTED', 'a token with this accessor exists: try again');
  return t;
}

/** Marks a token revoked (kept, so listings and the audit trail still name it). */
export async function revokeToken(store: ClusterStore, keys: Keys, accessor: string, now: number): Promise<TokenRecord> {
  requireAccessor(accessor);
  for (let i = 0; i < 5; i++) {
    const kv = await store.get(keys.token(accessor));
    const rec = parseToken(kv?.value);
    if (!kv || !rec) throw new TarcilError('NOT_FOUND', `no token ${accessor}`, { field: 'accessor' });
    if (rec.revokedAt !== undefined) return rec;
    const next: TokenRecord = { ...rec, revokedAt: now };
    const res = await store.txn({
      compare: [{ key: keys.token(accessor), target: 'mod', op: '==', value: kv.modRevision }],
      success: [{ type: 'put', key: keys.token(accessor), value: JSON.stringify(next) }],
    });
    if (res.succeeded) return next;
  }
  throw new TarcilError('ABORTED', `token ${accessor} kept changing: try again`);
}
