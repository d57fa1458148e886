/**
 * AclBootstrap, CreateToken, ListTokens, RevokeToken and ListAudit: the token records
 * (tenancy/acl.ts) and the audit trail (tenancy/audit.ts) over gRPC. Who may call them is the auth
 * layer's business (auth.ts); these only do the work.
 */
import type * as grpc from '@grpc/grpc-js';
import type { Keys } from '../state/keys.ts';
import type { ClusterStore } from '../store/types.ts';
import { bootstrap, createToken, listTokens, parsePolicy, revokeToken, type TokenRecord } from '../tenancy/acl.ts';
import { listAudit, type AuditRecord } from '../tenancy/audit.ts';
import { requireNamespaceName } from '../tenancy/namespaces.ts';
import type { Clock } from '../util/clock.ts';
import type { AuditRecord as AuditProto } from '../rpc/gen/tarcil/v1/AuditRecord.ts';
import type { SchedulerHandlers } from '../rpc/gen/tarcil/v1/Scheduler.ts';
import type { Token } from '../rpc/gen/tarcil/v1/Token.ts';
import { unaryStatus } from '../rpc/grpc.ts';

export interface AclServiceDeps {
  store: ClusterStore;
  keys: Keys;
  clock: Clock;
  /** Told of a token created or revoked here, so this front-end's cache drops what it knew (auth.ts). */
  onChanged?: (accessor: string) => void;
}

export function tokenToProto(t: TokenRecord): Token {
  return {
    accessor: t.accessor,
    name: t.name,
    policyJson: JSON.stringify(t.policy),
    createdAtMs: t.createdAt,
    expiresAtMs: t.expiresAt ?? 0,
    revokedAtMs: t.revokedAt ?? 0,
    certCommonName: t.certCommonName ?? '',
  };
}

function auditToProto(r: AuditRecord): AuditProto {
  return {
    atMs: r.at,
    id: r.id,
    who: r.who,
    accessor: r.accessor ?? '',
    peer: r.peer,
    rpc: r.rpc,
    namespace: r.namespace ?? '',
    target: r.target ?? '',
    result: r.result,
    message: r.message ?? '',
  };
}

type AclRpcs = 'AclBootstrap' | 'CreateToken' | 'ListTokens' | 'RevokeToken' | 'ListAudit';

/** A unary handler from a function of the request. */
function unary<Req, Res>(fn: (req: Req) => Promise<Res>): grpc.handleUnaryCall<Req, Res> {
  return (call, cb) => {
    void Promise.resolve()
      .then(() => fn(call.request))
      .then(
        (r) => cb(null, r),
        (e: unknown) => cb(unaryStatus(e)),
      );
  };
}

export function aclHandlers(d: AclServiceDeps): Pick<SchedulerHandlers, AclRpcs> {
  return {
    AclBootstrap: unary(async (req) => {
      const t = await bootstrap(d.store, d.keys, req.name || 'bootstrap', d.clock.now());
      return { token: tokenToProto(t.record), secret: t.secret };
    }),
    CreateToken: unary(async (req) => {
      const policy = parsePolicy(req.policyJson, 'policy_json');
      const t = await createToken(d.store, d.keys, {
        name: req.name,
        policy,
        now: d.clock.now(),
        // 0 (or unset) is "never expires"; anything else, NaN included, is checked by createToken.
        ...(req.ttlMs !== 0 ? { ttlMs: req.ttlMs } : {}),
        ...(req.certCommonName ? { certCommonName: req.certCommonName } : {}),
      });
      d.onChanged?.(t.record.accessor);
      return { token: tokenToProto(t.record), secret: t.secret };
    }),
    ListTokens: unary(async () => ({ tokens: (await listTokens(d.store, d.keys)).map(tokenToProto) })),
    RevokeToken: unary(async (req) => {
      const rec = await revokeToken(d.store, d.keys, req.accessor, d.clock.now());
      d.onChanged?.(rec.accessor);
      return tokenToProto(rec);
    }),
    ListAudit: unary(async (req) => {
      if (req.namespace !== '') requireNamespaceName(req.namespace);
      // 0 (or unset) is "every record kept"; anything else, NaN included, is checked by listAudit.
      const { records, total } = await listAudit(d.store, d.keys, {
        ...(req.sinceMs !== 0 ? { since: req.sinceMs } : {}),
        ...(req.namespace ? { namespace: req.namespace } : {}),
        limit: req.limit,
      });
      return { records: records.map(auditToProto), total };
    }),
  };
}
