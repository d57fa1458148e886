/**
 * ListNamespaces, PutNamespace and DeleteNamespace: the namespace records (tenancy/namespaces.ts)
 * with what each uses now, counted from the store: RUs held by its jobs' tasks, its jobs by state.
 */
import type { RuRecord } from '../model/types.ts';
import { parseJson } from '../state/records.ts';
import type { LiveJobRecord } from '../state/live-records.ts';
import type { Keys } from '../state/keys.ts';
import type { ClusterStore } from '../store/types.ts';
import { namespaceOfJob } from '../tenancy/namespace.ts';
import { deleteNamespace, listNamespaceRecords, putNamespace, type NamespaceRecord } from '../tenancy/namespaces.ts';
import type { Namespace } from '../rpc/gen/tarcil/v1/Namespace.ts';
import type { PutNamespaceRequest__Output } from '../rpc/gen/tarcil/v1/PutNamespaceRequest.ts';

export interface NamespaceUsage {
  rusInUse: number;
  jobs: Record<string, number>;
}

/** Every namespace with its usage: one read of the RUs and the jobs. */
export async function listNamespaces(store: ClusterStore, keys: Keys): Promise<Namespace[]> {
  const [records, usage] = await Promise.all([listNamespaceRecords(store, keys), namespaceUsage(store, keys)]);
  return records.map((r) => namespaceToProto(r, usage.get(r.name)));
}

export async function namespaceUsage(store: ClusterStore, keys: Keys): Promise<Map<string, NamespaceUsage>> {
  const res = await store.txn({
    compare: [],
    success: [
      { type: 'get', key: keys.rus(), prefix: true },
      { type: 'get', key: keys.jobs(), prefix: true },
    ],
  });
  const out = new Map<string, NamespaceUsage>();
  const of = (ns: string): NamespaceUsage => {
    let u = out.get(ns);
    if (!u) out.set(ns, (u = { rusInUse: 0, jobs: {} }));
    return u;
  };
  for (const kv of res.responses[0] ?? []) {
    if (!kv.value.includes('"job"')) continue;
    const rec = parseJson<RuRecord>(kv);
    if (rec && (rec.state === 'busy' || rec.state === 'reserved') && rec.job) of(namespaceOfJob(rec.job)).rusInUse++;
  }
  for (const kv of res.responses[1] ?? []) {
    const id = keys.tail(keys.jobs(), kv.key);
    const rec = parseJson<LiveJobRecord>(kv);
    if (id === undefined || !rec) continue;
    const u = of(namespaceOfJob(id));
    u.jobs[rec.state] = (u.jobs[rec.state] ?? 0) + 1;
  }
  return out;
}

export function namespaceToProto(r: NamespaceRecord, u: NamespaceUsage | undefined): Namespace {
  return {
    name: r.name,
    weight: r.weight,
    maxRus: r.maxRus,
    maxWaitingJobs: r.maxWaitingJobs,
    createdAtMs: r.createdAt,
    rusInUse: u?.rusInUse ?? 0,
    jobs: { ...(u?.jobs ?? {}) },
  };
}

export async function putNamespaceRpc(store: ClusterStore, keys: Keys, req: PutNamespaceRequest__Output, now: number): Promise<Namespace> {
  const rec = await putNamespace(
    store,
    keys,
    req.name,
    {
      ...(req.weight !== undefined ? { weight: req.weight } : {}),
      ...(req.maxRus !== undefined ? { maxRus: req.maxRus } : {}),
      ...(req.maxWaitingJobs !== undefined ? { maxWaitingJobs: req.maxWaitingJobs } : {}),
    },
    now,
  );
  return namespaceToProto(rec, (await namespaceUsage(store, keys)).get(rec.name));
}

export async function deleteNamespaceRpc(store: ClusterStore, keys: Keys, name: string): Promise<Namespace> {
  return namespaceToProto(await deleteNamespace(store, keys, name), undefined);
}
