/**
 * `tarcil acl bootstrap`, `tarcil acl token create|list|revoke` and `tarcil audit`: access tokens
 * and the audit trail of a front-end (docs/tenancy.md, "Access control" and "Audit trail"). The gRPC client
 * and the policy validator are loaded only when a command runs.
 */
import { type Command, Option } from 'commander';
import { readFileSync } from 'node:fs';
import { invalid } from '../util/errors.ts';
import type { ListAuditResponse__Output } from '../rpc/gen/tarcil/v1/ListAuditResponse.ts';
import type { ListTokensResponse__Output } from '../rpc/gen/tarcil/v1/ListTokensResponse.ts';
import type { Token__Output } from '../rpc/gen/tarcil/v1/Token.ts';
import type { ClientFlags } from './client.ts';
import { duration, intIn } from './flags.ts';

type Out = (line: string) => void;
export interface AclFlags extends ClientFlags {
  output?: 'json';
}

const stdout: Out = (l) => {
  process.stdout.write(`${l}\n`);
};

const outputOption = (c: Command): Command => c.addOption(new Option('-o, --output <format>', 'json: the API message in its JSON form').choices(['json']));

const iso = (ms: number): string => (ms > 0 ? new Date(ms).toISOString() : '-');

/** The policy from `--policy`: inline JSON (starting with `{`) or a file holding it; checked here before it is sent. */
export async function readPolicy(arg: string): Promise<string> {
  let text = arg;
  if (!arg.trimStart().startsWith('{')) {
    try {
      text = readFileSync(arg, 'utf8');
    } catch (e) {
      throw invalid('--policy', `must be inline JSON or a readable file (cannot read '${arg}': ${(e as NodeJS.ErrnoException).code ?? String(e)})`);
    }
  }
  const { parsePolicy } = await import('../tenancy/acl.ts');
  return JSON.stringify(parsePolicy(text, '--policy'));
}

interface TokenView {
  accessor: string;
  name: string;
  policyJson: string;
  createdAtMs: number;
  expiresAtMs: number;
  revokedAtMs: number;
  certCommonName: string;
}

function tokenLine(t: TokenView): string {
  const state =
    t.revokedAtMs > 0
      ? `revoked ${iso(t.revokedAtMs)}`
      : t.expiresAtMs > 0 && t.expiresAtMs <= Date.now()
        ? `expired ${iso(t.expiresAtMs)}`
        : t.expiresAtMs > 0
          ? `expires ${iso(t.expiresAtMs)}`
          : 'no expiry';
  return `${t.accessor}  ${t.name}  ${state}  ${t.policyJson}${t.certCommonName ? `  cert ${t.certCommonName}` : ''}`;
}

function created(res: { token: TokenView | null; secret: string }, o: AclFlags, out: Out): void {
  if (o.output === 'json') {
    out(JSON.stringify(res));
    return;
  }
  out(`token ${res.token?.accessor ?? ''} (${res.token?.name ?? ''}) created; its secret, shown only this once:`);
  out(res.secret);
  out('(clients send it with --token or $TARCIL_TOKEN; the cell keeps only its hash)');
}

export async function aclBootstrapCommand(o: AclFlags & { name?: string }, out: Out = stdout): Promise<void> {
  const { client, unary } = await import('./client.ts');
  const c = client(o);
  try {
    created(await unary(o, (opts, cb) => c.AclBootstrap({ name: o.name ?? '' }, opts, cb)), o, out);
  } finally {
    c.close();
  }
}

export async function tokenCreateCommand(o: AclFlags & { name: string; policy: string; ttl?: number; certCn?: string }, out: Out = stdout): Promise<void> {
  const policyJson = await readPolicy(o.policy);
  const { client, unary } = await import('./client.ts');
  const c = client(o);
  try {
    created(await unary(o, (opts, cb) => c.CreateToken({ name: o.name, policyJson, ttlMs: o.ttl ?? 0, certCommonName: o.certCn ?? '' }, opts, cb)), o, out);
  } finally {
    c.close();
  }
}

export async function tokenListCommand(o: AclFlags, out: Out = stdout): Promise<void> {
  const { client, unary } = await import('./client.ts');
  const c = client(o);
  try {
    const res = await unary<ListTokensResponse__Output>(o, (opts, cb) => c.ListTokens({}, opts, cb));
    if (o.output === 'json') out(JSON.stringify(res));
    else for (const t of res.tokens) out(tokenLine(t));
  } finally {
    c.close();
  }
}

export async function tokenRevokeCommand(accessor: string, o: AclFlags, out: Out = stdout): Promise<void> {
  const { client, unary } = await import('./client.ts');
  const c = client(o);
  try {
    const t = await unary<Token__Output>(o, (opts, cb) => c.RevokeToken({ accessor }, opts, cb));
    if (o.output === 'json') out(JSON.stringify(t));
    else out(`token ${t.accessor} (${t.name}) revoked at ${iso(t.revokedAtMs)}`);
  } finally {
    c.close();
  }
}

export async function auditCommand(o: AclFlags & { since?: number; namespace?: string; limit?: number }, out: Out = stdout): Promise<void> {
  const { client, unary } = await import('./client.ts');
  const c = client(o);
  try {
    const res = await unary<ListAuditResponse__Output>(o, (opts, cb) =>
      c.ListAudit({ sinceMs: o.since !== undefined ? Date.now() - o.since : 0, namespace: o.namespace ?? '', limit: o.limit ?? 0 }, opts, cb),
    );
    if (o.output === 'json') {
      out(JSON.stringify(res));
      return;
    }
    for (const r of res.records) {
      out(`${iso(r.atMs)}  ${r.rpc}  ${r.who}  ${r.peer}  ${r.namespace || '-'}  ${r.target || '-'}  ${r.result}${r.message ? `: ${r.message}` : ''}`);
    }
    if (res.total > res.records.length)
      out(`${res.records.length} of ${res.total} audit records (the newest); --limit N (at most 100,000) or --since to see others`);
  } finally {
    c.close();
  }
}

/** Registers `acl` and `audit`; `clientOptions` adds the client flags every client command has. */
export function registerAclCommands(program: Command, clientOptions: (c: Command) => Command): void {
  const acl = program.command('acl').description('access tokens of a front-end with ACLs on (tarcil server --acl)');
  outputOption(clientOptions(acl.command('bootstrap').description('the first admin token: works once per cell; prints its secret once')))
    .option('--name <name>', "the token's name", 'bootstrap')
    .action(async (o: AclFlags & { name?: string }) => aclBootstrapCommand(o));
  const token = acl.command('token').description('create, list and revoke access tokens (admin)');
  outputOption(clientOptions(token.command('create').description('a new token with a policy; prints its secret once')))
    .addOption(new Option('--name <name>', "the token's name (who it is for)").makeOptionMandatory())
    .addOption(
      new Option(
        '--policy <file|json>',
        'the policy: a JSON file or inline JSON, e.g. \'{"namespaces":{"team-a":["submit","read","cancel"]},"cluster":[]}\'',
      ).makeOptionMandatory(),
    )
    .addOption(
      new Option('--ttl <duration>', 'expires this long after creation (e.g. 24h; default: never)').argParser(
        duration('--ttl', { min: 1000, max: 10 * 365 * 86_400_000 }),
      ),
    )
    .option('--cert-cn <name>', 'a client certificate of this common name (mutual TLS) gets this policy without a token')
    .action(async (o: AclFlags & { name: string; policy: string; ttl?: number; certCn?: string }) => tokenCreateCommand(o));
  outputOption(clientOptions(token.command('list').description('every token: accessor, name, state, policy (never the secrets)'))).action(async (o: AclFlags) =>
    tokenListCommand(o),
  );
  outputOption(clientOptions(token.command('revoke <accessor>').description('refuse a token from now on'))).action(async (accessor: string, o: AclFlags) =>
    tokenRevokeCommand(accessor, o),
  );

  outputOption(clientOptions(program.command('audit').description('the audit trail: every call that changed something, accepted or refused (admin)')))
    .addOption(
      new Option('--since <duration>', 'only records of the last duration (e.g. 10m)').argParser(duration('--since', { min: 1000, max: 366 * 86_400_000 })),
    )
    .option('--limit <n>', 'at most this many, the newest (0: 1,000)', intIn('--limit', { min: 0, max: 100_000 }), 0)
    .action(async (o: AclFlags & { since?: number; namespace?: string; limit?: number }) => auditCommand(o));
}
