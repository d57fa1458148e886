/**
 * The namespace commands (`tarcil namespaces`, `tarcil namespace create|set|delete`): calls to a
 * front-end's Scheduler service and their output, as the other client commands (client.ts).
 */
import Table from 'cli-table3';
import type { ListNamespacesResponse__Output } from '../rpc/gen/tarcil/v1/ListNamespacesResponse.ts';
import type { Namespace__Output } from '../rpc/gen/tarcil/v1/Namespace.ts';
import { TarcilError } from '../util/errors.ts';
import { client, doc, unary, type ClientFlags, type OutputFlags } from './client.ts';
import { tableStyle } from './color.ts';
import { formatOf, isDocument, renderMessage } from './output.ts';

/** `tarcil namespaces`: each namespace with its weight, quota and what it uses now. */
export async function namespacesCommand(o: ClientFlags & OutputFlags, out: (s: string) => void): Promise<void> {
  const c = client(o);
  try {
    const res = await unary<ListNamespacesResponse__Output>(o, (opts, cb) => c.ListNamespaces({}, opts, cb));
    const fmt = formatOf(o);
    if (isDocument(fmt)) return out(await doc(fmt, 'ListNamespacesResponse', res, false));
    const t = new Table({ head: ['namespace', 'weight', 'RUs in use', 'max RUs', 'max waiting jobs', 'jobs'], style: tableStyle() });
    for (const n of res.namespaces) {
      const jobs = Object.entries(n.jobs)
        .sort(([a], [b]) => a.localeCompare(b))
        .map(([k, v]) => `${v} ${k}`)
        .join(', ');
      t.push([
        n.name,
        String(n.weight),
        String(n.rusInUse),
        n.maxRus > 0 ? String(n.maxRus) : '-',
        n.maxWaitingJobs > 0 ? String(n.maxWaitingJobs) : '-',
        jobs || '-',
      ]);
    }
    out(t.toString());
  } finally {
    c.close();
  }
}

export interface NamespaceFlags extends ClientFlags {
  weight?: number;
  maxRus?: number;
  maxWaitingJobs?: number;
  json?: boolean;
}

/**
 * `tarcil namespace create|set <name>`: PutNamespace with the flags given (the others keep their
 * value). `create` refuses a namespace that exists already.
 */
export async function namespacePutCommand(verb: 'create' | 'set', name: string, o: NamespaceFlags, out: (s: string) => void): Promise<void> {
  const c = client(o);
  try {
    if (verb === 'create') {
      const list = await unary<ListNamespacesResponse__Output>(o, (opts, cb) => c.ListNamespaces({}, opts, cb));
      if (list.namespaces.some((n) => n.name === name))
        throw new TarcilError('ALREADY_EXISTS', `namespace ${name} exists already (change it: tarcil namespace set ${name} ...)`);
    }
    const req = {
      name,
      ...(o.weight !== undefined ? { weight: o.weight } : {}),
      ...(o.maxRus !== undefined ? { maxRus: o.maxRus } : {}),
      ...(o.maxWaitingJobs !== undefined ? { maxWaitingJobs: o.maxWaitingJobs } : {}),
    };
    const n = await unary<Namespace__Output>(o, (opts, cb) => c.PutNamespace(req, opts, cb));
    if (o.json) return out(await renderMessage('json', 'Namespace', n));
    out(
      `namespace ${n.name}: weight ${n.weight}, max RUs ${n.maxRus > 0 ? n.maxRus : 'no limit'}, max waiting jobs ${n.maxWaitingJobs > 0 ? n.maxWaitingJobs : 'no limit'}`,
    );
  } finally {
    c.close();
  }
}

/** `tarcil namespace delete <name>`: only a namespace that holds no job. */
export async function namespaceDeleteCommand(name: string, o: ClientFlags, out: (s: string) => void): Promise<void> {
  const c = client(o);
  try {
    await unary<Namespace__Output>(o, (opts, cb) => c.DeleteNamespace({ name }, opts, cb));
    out(`namespace ${name} deleted`);
  } finally {
    c.close();
  }
}
