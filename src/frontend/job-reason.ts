/**
 * A job's one current reason as a front-end answers it (ExplainJob, GetJob, the dashboard): the
 * pure `jobReason` (owner/reason.ts) over the job's record, its decision records (stored,
 * and the one in progress when this front-end owns the job), the cell as this front-end's agents
 * see it, and its namespace's quota (one read, only for a waiting job of a namespace other than
 * default).
 */
import type { JobManager } from '../owner/manager.ts';
import { jobReason, summarizeCell, type CellSummary, type JobReason, type QuotaSummary } from '../owner/reason.ts';
import type { DecisionRecord } from '../state/decisions.ts';
import type { Keys } from '../state/keys.ts';
import { isFinalJob, type LiveJobRecord, type StoredDecisions } from '../state/live-records.ts';
import type { ClusterStore } from '../store/types.ts';
import { hasQuotaNamespace, readQuota } from '../tenancy/quota.ts';
import type { Reason } from '../rpc/gen/tarcil/v1/Reason.ts';

export interface JobReasonDeps {
  manager: JobManager;
  store: ClusterStore;
  keys: Keys;
  now: number;
}

/** The stored decision records, then the one in progress if it is not among them (as explain merges them). */
export function mergedDecisions(stored: StoredDecisions | undefined, live: DecisionRecord | undefined): DecisionRecord[] {
  const records = [...(stored?.records ?? [])];
  if (live && !records.some((r) => r.startedAt === live.startedAt && r.agent === live.agent)) records.push(live);
  return records;
}

/** Whether the job waits for RUs: the cell and the quota matter to its reason. */
function waits(rec: LiveJobRecord): boolean {
  return !isFinalJob(rec.state) && rec.cancelRequested !== true && rec.spec.tasks - (rec.placed ?? 0) > 0;
}

/** The job's reason now (see the module's comment). */
export async function readJobReason(d: JobReasonDeps, id: string, rec: LiveJobRecord, stored: StoredDecisions | undefined): Promise<JobReason> {
  const decisions = mergedDecisions(stored, d.manager.inflightDecision(id));
  let cell: CellSummary | undefined;
  let quota: QuotaSummary | undefined;
  if (waits(rec)) {
    const agent = d.manager.agents[0];
    if (agent) cell = summarizeCell(agent.state, rec.spec.constraints, d.manager.cell.values());
    if (hasQuotaNamespace(id)) {
      const q = await readQuota(d.store, d.keys, id);
      if (q && q.maxRus > 0) quota = { namespace: q.ns, used: q.usage.total, limit: q.maxRus };
    }
  }
  return jobReason({ jobId: id, rec, decisions, now: d.now, ...(cell ? { cell } : {}), ...(quota ? { quota } : {}) });
}

/** The reason as the API's message. */
export function reasonToProto(r: JobReason): Reason {
  return { ...r, holders: r.holders.map((h) => ({ ...h })), buckets: [...r.buckets], servers: [...r.servers] };
}
