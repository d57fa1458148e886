/**
 * The auth layer of the Scheduler service: wraps every handler with who is calling
 * (authentication), whether their policy allows the call (authorization), and the audit record
 * of every call that changes something.
 *
 * With ACLs on, a call carries `authorization: Bearer <accessor>.<secret>` in its metadata, or
 * comes over mutual TLS with a client certificate whose common name a token names (used when no
 * token is sent). No token, or an unknown, expired or revoked one: UNAUTHENTICATED. A valid token
 * whose policy does not allow the call: PERMISSION_DENIED. Either is answered before the handler
 * runs, so a refused call writes nothing but its audit record (when the RPC changes something).
 * SubmitJob's record rides in the submission's own transaction when that stores the job (auditRide):
 * an accepted job costs the store no write of its own for it.
 * With ACLs off every call is allowed, as `anonymous`; the audit trail is kept all the same.
 *
 * What each RPC needs (RULES below): SubmitJob `submit` on the job's namespace; GetJob, WatchJob,
 * ExplainJob, TaskLogs `read` on the job's namespace; CancelJob `cancel`; ListJobs `read` on the
 * namespace, or with all_namespaces `read` on some namespace, the list filtered to those it may
 * read; ListNamespaces and GetProfile `read` on some namespace (ListNamespaces shows only those
 * it may read, unless admin); GetCluster `read` on some namespace or `nodes`; SetNodeScheduling
 * `nodes`; PutNamespace, DeleteNamespace, CreateToken, ListTokens, RevokeToken, ListAudit `admin`;
 * AclBootstrap none (it works once per cell, guarded by the store).
 *
 * Token lookups are cached for `cacheTtlMs` (default 2 s): a token revoked through another
 * front-end is still honoured here for at most that long (and a client certificate a new token
 * names is known after at most that long); one revoked or created here is seen at once.
 */
import * as grpc from '@grpc/grpc-js';
import type { Keys } from '../state/keys.ts';
import type { ClusterStore, Op } from '../store/types.ts';
import {
  allows,
  allowsAny,
  listTokens,
  readToken,
  secretMatches,
  splitSecret,
  tokenUnusable,
  type NamespaceVerb,
  type Policy,
  type TokenRecord,
  type Verb,
} from '../tenancy/acl.ts';
import { auditEntry, auditPut, logAudit, writeAudit, type AuditRecord } from '../tenancy/audit.ts';
import { DEFAULT_NAMESPACE, namespaceOfJob } from '../tenancy/namespace.ts';
import type { Clock } from '../util/clock.ts';
import { TarcilError, isTarcilError } from '../util/errors.ts';
import type { Logger } from '../util/log.ts';
import type { SchedulerHandlers } from '../rpc/gen/tarcil/v1/Scheduler.ts';
import { endStreamWithError, unaryStatus } from '../rpc/grpc.ts';
import { jobIdOf } from './job-id.ts';
import { setReadableNamespaces } from './list-filter.ts';

export const DEFAULT_TOKEN_CACHE_MS = 2000;

export interface AuthOptions {
  /** ACLs on: every call needs a token (or a client certificate a token names). */
  acl: boolean;
  store: ClusterStore;
  keys: Keys;
  clock: Clock;
  /** The `audit` logger. */
  log: Logger;
  /** Client certificates are verified (mutual TLS): their common name may stand for a token. */
  certAuth?: boolean;
  cacheTtlMs?: number;
}

/** Who is calling. `policy` undefined: ACLs off, everything allowed. */
export interface Principal {
  who: string;
  accessor?: string;
  policy?: Policy;
}

type Req = Record<string, unknown>;
type Need = { verb: Verb; ns?: string } | { any: readonly NamespaceVerb[]; orCluster?: Verb } | 'none';

interface Rule {
  stream?: boolean;
  /** Changes something: audited. */
  mutates?: boolean;
  need(req: Req): Need;
  /** The namespace and the object of the call, for the audit record. */
  about?(req: Req, res: Req | undefined): { namespace?: string; target?: string };
  /** Its handler may carry the `ok` audit record in its own write (auditRide). */
  ride?: boolean;
}

/**
 * The `ok` audit record of a call that may carry it in its own transaction: `put(target)` gives
 * the write (the response's object named by the handler beforehand), `written()` says the
 * transaction that carried it was committed. Without `written()` the record is written after the
 * call, as for any other.
 */
export interface AuditRide {
  put(target: string): Op;
  written(): void;
}
const rides = new WeakMap<object, AuditRide>();

/** The ride of this call, when its RPC has one (SubmitJob). */
export function auditRide(call: object): AuditRide | undefined {
  return rides.get(call);
}

const str = (req: Req, field: string): string => (typeof req[field] === 'string' ? req[field] : '');
const jobNs = (req: Req): string => namespaceOfJob(jobIdOf({ jobId: str(req, 'jobId'), namespace: str(req, 'namespace') }));
const readJob: Rule = { need: (req) => ({ verb: 'read', ns: jobNs(req) }) };
const admin: Rule = { need: () => ({ verb: 'admin' }) };

/** The namespace a SubmitJob request names: its own field, else the spec's, else default. */
function submitNamespace(req: Req): string {
  const own = str(req, 'namespace');
  if (own !== '') return own;
  const spec = req['spec'];
  if (spec && typeof spec === 'object' && typeof (spec as Req)['namespace'] === 'string' && (spec as Req)['namespace'] !== '')
    return (spec as Req)['namespace'] as string;
  const text = str(req, 'specJson');
  if (text !== '') {
    try {
      const v = JSON.parse(text) as unknown;
      if (v && typeof v === 'object' && typeof (v as Req)['namespace'] === 'string' && (v as Req)['namespace'] !== '') return (v as Req)['namespace'] as string;
    } catch {
      // The handler says what is wrong with it.
    }
  }
  return DEFAULT_NAMESPACE;
}

const RULES: Record<keyof SchedulerHandlers & string, Rule> = {
  SubmitJob: {
    mutates: true,
    ride: true,
    need: (req) => ({ verb: 'submit', ns: submitNamespace(req) }),
    about: (req, res) => ({ namespace: submitNamespace(req), ...(res && typeof res['jobId'] === 'string' ? { target: res['jobId'] } : {}) }),
  },
  GetJob: readJob,
  WatchJob: { ...readJob, stream: true },
  ExplainJob: readJob,
  TaskLogs: { ...readJob, stream: true },
  CancelJob: {
    mutates: true,
    need: (req) => ({ verb: 'cancel', ns: jobNs(req) }),
    about: (req) => ({ target: str(req, 'jobId'), ...maybe('namespace', () => jobNs(req)) }),
  },
  ListJobs: { need: (req) => (req['allNamespaces'] === true ? { any: ['read'] } : { verb: 'read', ns: str(req, 'namespace') || DEFAULT_NAMESPACE }) },
  GetCluster: { need: () => ({ any: ['read'], orCluster: 'nodes' }) },
  GetProfile: { need: () => ({ any: ['read'] }) },
  SetNodeScheduling: { mutates: true, need: () => ({ verb: 'nodes' }), about: (req) => ({ target: `${str(req, 'server')} (${str(req, 'action')})` }) },
  ListNamespaces: { need: () => ({ any: ['read'] }) },
  PutNamespace: { ...admin, mutates: true, about: (req) => ({ namespace: str(req, 'name'), target: str(req, 'name') }) },
  DeleteNamespace: { ...admin, mutates: true, about: (req) => ({ namespace: str(req, 'name'), target: str(req, 'name') }) },
  AclBootstrap: { mutates: true, need: () => 'none', about: (_req, res) => ({ target: accessorOf(res) }) },
  CreateToken: { ...admin, mutates: true, about: (req, res) => ({ target: accessorOf(res) ?? str(req, 'name') }) },
  ListTokens: admin,
  RevokeToken: { ...admin, mutates: true, about: (req) => ({ target: str(req, 'accessor') }) },
  ListAudit: admin,
};

/** `{ [key]: fn() }`, or nothing when fn throws (a malformed request is audited without it). */
function maybe(key: string, fn: () => string): Record<string, string> {
  try {
    return { [key]: fn() };
  } catch {
    return {};
  }
}

function accessorOf(res: Req | undefined): string | undefined {
  const t = res?.['token'];
  return t && typeof t === 'object' && typeof (t as Req)['accessor'] === 'string' ? ((t as Req)['accessor'] as string) : undefined;
}

const unauthenticated = (why: string): TarcilError =>
  new TarcilError('UNAUTHENTICATED', `${why}: with ACLs on, every call needs a token (--token or $TARCIL_TOKEN; metadata \`authorization: Bearer <token>\`)`);

type AnyCall = grpc.ServerUnaryCall<Req, Req> | grpc.ServerWritableStream<Req, Req>;
type UnaryHandler = (call: grpc.ServerUnaryCall<Req, Req>, cb: grpc.sendUnaryData<Req>) => unknown;
type StreamHandler = (call: grpc.ServerWritableStream<Req, Req>) => unknown;

export class AuthLayer {
  private readonly cache = new Map<string, { rec: TokenRecord | undefined; at: number }>();
  private certIndex: { at: number; byCn: Map<string, TokenRecord> } | undefined;
  private readonly ttl: number;

  constructor(private readonly o: AuthOptions) {
    this.ttl = o.cacheTtlMs ?? DEFAULT_TOKEN_CACHE_MS;
  }

  get enabled(): boolean {
    return this.o.acl;
  }

  /** A token created or revoked through this front-end: read again at its next use. */
  forget(accessor: string): void {
    this.cache.delete(accessor);
    this.certIndex = undefined;
  }

  private async token(accessor: string): Promise<TokenRecord | undefined> {
    const now = Date.now();
    const hit = this.cache.get(accessor);
    if (hit && now - hit.at < this.ttl) return hit.rec;
    const rec = await readToken(this.o.store, this.o.keys, accessor);
    // Unknown accessors are not cached: a lookup costs a read, and the map stays bounded by the tokens.
    if (rec) this.cache.set(accessor, { rec, at: now });
    else this.cache.delete(accessor);
    return rec;
  }

  private async byCert(cn: string): Promise<TokenRecord | undefined> {
    const now = Date.now();
    if (!this.certIndex || now - this.certIndex.at >= this.ttl) {
      const byCn = new Map<string, TokenRecord>();
      for (const t of await listTokens(this.o.store, this.o.keys)) {
        if (t.certCommonName && tokenUnusable(t, this.o.clock.now()) === undefined) byCn.set(t.certCommonName, t);
      }
      this.certIndex = { at: now, byCn };
    }
    return this.certIndex.byCn.get(cn);
  }

  /** Who makes the call, or UNAUTHENTICATED. */
  async authenticate(call: AnyCall): Promise<Principal> {
    if (!this.o.acl) return { who: 'anonymous' };
    const header = call.metadata.get('authorization')[0];
    const text = typeof header === 'string' ? header : header?.toString('utf8');
    if (text !== undefined) {
      const m = /^Bearer\s+(\S+)$/i.exec(text.trim());
      if (!m?.[1]) throw unauthenticated('the authorization metadata must be `Bearer <token>`');
      const parts = splitSecret(m[1]);
      if (!parts) throw unauthenticated('malformed token (it is `<accessor>.<secret>`, as `tarcil acl` printed it)');
      const rec = await this.token(parts.accessor);
      if (!rec || !secretMatches(rec, parts.raw)) throw unauthenticated('unknown token');
      const why = tokenUnusable(rec, this.o.clock.now());
      if (why) throw unauthenticated(why);
      return { who: `token:${rec.accessor} (${rec.name})`, accessor: rec.accessor, policy: rec.policy };
    }
    const cn = this.o.certAuth ? peerCommonName(call) : undefined;
    if (cn !== undefined) {
      const rec = await this.byCert(cn);
      if (rec) return { who: `cert:${cn}`, accessor: rec.accessor, policy: rec.policy };
      throw unauthenticated(`no token names the client certificate ${cn}`);
    }
    throw unauthenticated('no token');
  }

  private authorize(p: Principal, rpc: string, need: Need): void {
    const pol = p.policy;
    if (!pol || need === 'none') return;
    let ok: boolean;
    let what: string;
    if ('verb' in need) {
      ok = allows(pol, need.verb, need.ns);
      what = need.ns === undefined ? `'${need.verb}'` : `'${need.verb}' on namespace ${need.ns}`;
    } else {
      ok = need.any.some((v) => allowsAny(pol, v)) || (need.orCluster !== undefined && allows(pol, need.orCluster));
      what = `'${need.any.join("' or '")}' on some namespace${need.orCluster ? ` or '${need.orCluster}'` : ''}`;
    }
    if (!ok) throw new TarcilError('PERMISSION_DENIED', `${rpc} needs ${what}; the policy of ${p.who} does not allow it`);
  }

  private async audit(rec: Omit<AuditRecord, 'id'>): Promise<void> {
    await writeAudit(this.o.store, this.o.keys, this.o.log, rec);
  }

  private auditRecord(
    rpc: string,
    rule: Rule,
    call: AnyCall,
    p: Principal | undefined,
    req: Req,
    res: Req | undefined,
    err: { code: string; message: string } | undefined,
  ): Omit<AuditRecord, 'id'> {
    let about: { namespace?: string; target?: string } = {};
    try {
      about = rule.about?.(req, res) ?? {};
    } catch {
      // A malformed request: recorded without its namespace or target.
    }
    return {
      at: this.o.clock.now(),
      who: p?.who ?? 'unauthenticated',
      ...(p?.accessor ? { accessor: p.accessor } : {}),
      peer: call.getPeer(),
      rpc,
      ...(about.namespace ? { namespace: about.namespace } : {}),
      ...(about.target ? { target: about.target } : {}),
      result: err ? err.code : 'ok',
      ...(err ? { message: err.message.slice(0, 500) } : {}),
    };
  }

  /** Offers the call's `ok` record to its handler's own write; gives the record once it was written. */
  private offerRide(rpc: string, rule: Rule, call: AnyCall, p: Principal): () => AuditRecord | undefined {
    let offered: AuditRecord | undefined;
    let written: AuditRecord | undefined;
    rides.set(call, {
      put: (target) => {
        offered = auditEntry(this.auditRecord(rpc, rule, call, p, call.request, { jobId: target }, undefined));
        return auditPut(this.o.keys, offered);
      },
      written: () => {
        written = offered;
      },
    });
    return () => written;
  }

  /** Who makes the call (AclBootstrap needs no token: a valid one sent says who bootstrapped). */
  private async caller(rule: Rule, call: AnyCall): Promise<Principal> {
    if (rule.need(call.request) === 'none') return this.authenticate(call).catch(() => ({ who: this.o.acl ? 'unauthenticated' : 'anonymous' }));
    return this.authenticate(call);
  }

  /** Every handler wrapped with authentication, authorization, filtering and the audit record. */
  wrap(handlers: SchedulerHandlers): SchedulerHandlers {
    const out: Record<string, unknown> = {};
    for (const [rpc, h] of Object.entries(handlers)) {
      const rule = RULES[rpc];
      if (!rule) throw new Error(`no access rule for ${rpc}`);
      out[rpc] = rule.stream ? this.wrapStream(rpc, rule, h as StreamHandler) : this.wrapUnary(rpc, rule, h as UnaryHandler);
    }
    return out as unknown as SchedulerHandlers;
  }

  private wrapStream(rpc: string, rule: Rule, h: StreamHandler): StreamHandler {
    // The promise goes back to the guard (rpc/guard.ts): a handler that throws ends its stream with a
    // status there, not as an unhandled rejection.
    return (call) =>
      this.caller(rule, call)
        .then((p) => this.authorize(p, rpc, rule.need(call.request)))
        .then(
          () => h(call),
          (e: unknown) => endStreamWithError(call, e),
        );
  }

  private wrapUnary(rpc: string, rule: Rule, h: UnaryHandler): UnaryHandler {
    // The promise goes back to the guard (rpc/guard.ts): a handler that throws is answered there.
    return (call, cb) =>
      (async (): Promise<void> => {
        let p: Principal | undefined;
        try {
          p = await this.caller(rule, call);
          this.authorize(p, rpc, rule.need(call.request));
        } catch (e) {
          // Refused (or a request too malformed to tell what it needs): the handler does not run;
          // the audit record is the only write.
          if (rule.mutates) await this.audit(this.auditRecord(rpc, rule, call, p, call.request, undefined, errorCode(e)));
          cb(unaryStatus(e));
          return;
        }
        const admitted = p;
        const pol = admitted.policy;
        if (rpc === 'ListJobs' && call.request['allNamespaces'] === true && pol && !pol.cluster.includes('admin'))
          setReadableNamespaces(call, (ns) => allows(pol, 'read', ns));
        const ridden = rule.mutates && rule.ride ? this.offerRide(rpc, rule, call, admitted) : undefined;
        h(call, (err, res) => {
          void (async (): Promise<void> => {
            // Carried by the handler's own transaction: logged only. A call that failed after it was
            // stored gets its failure recorded too.
            const carried = ridden?.();
            if (carried) logAudit(this.o.log, carried);
            if (rule.mutates && !(carried && !err))
              await this.audit(this.auditRecord(rpc, rule, call, admitted, call.request, res ?? undefined, err ? statusCode(err) : undefined));
            if (err || !res) cb(err, res);
            else cb(null, this.filter(rpc, admitted, call.request, res));
          })();
        });
      })();
  }

  /** ListJobs (all namespaces) and ListNamespaces show only what the caller may read. */
  private filter(rpc: string, p: Principal, req: Req, res: Req): Req {
    const pol = p.policy;
    if (!pol || pol.cluster.includes('admin')) return res;
    if (rpc === 'ListJobs' && req['allNamespaces'] === true && Array.isArray(res['jobs'])) {
      return { ...res, jobs: (res['jobs'] as Req[]).filter((j) => allows(pol, 'read', namespaceOfJob(str(j, 'id')))) };
    }
    if (rpc === 'ListNamespaces' && Array.isArray(res['namespaces'])) {
      return { ...res, namespaces: (res['namespaces'] as Req[]).filter((n) => allows(pol, 'read', str(n, 'name'))) };
    }
    return res;
  }
}

function errorCode(e: unknown): { code: string; message: string } {
  return isTarcilError(e) ? { code: e.code, message: e.message } : { code: 'INTERNAL', message: e instanceof Error ? e.message : String(e) };
}

function statusCode(err: Partial<grpc.StatusObject> | grpc.ServiceError): { code: string; message: string } {
  const name = err.code !== undefined ? (grpc.status[err.code] as string | undefined) : undefined;
  return { code: name ?? 'INTERNAL', message: err.details ?? '' };
}

/** The common name of a verified client certificate (mutual TLS), if any. */
function peerCommonName(call: AnyCall): string | undefined {
  const ctx = call.getAuthContext();
  const cn = ctx.sslPeerCertificate?.subject?.CN;
  return typeof cn === 'string' && cn !== '' ? cn : undefined;
}
