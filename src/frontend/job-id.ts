/** The job a request names: its id and namespace, checked. */
import { namespaceOfJob, resolveJobId } from '../tenancy/namespace.ts';
import { requireNamespaceName } from '../tenancy/namespaces.ts';
import { invalid } from '../util/errors.ts';

/**
 * The job a request names: its job_id, qualified with its namespace unless the id already is
 * (`<namespace>/<id>`). INVALID_ARGUMENT when they disagree or either is malformed.
 */
export function jobIdOf(req: { jobId: string; namespace?: string }): string {
  requireId(req.jobId);
  // A request without the field (an older client, a handler called directly) means default.
  const ns = req.namespace ?? '';
  if (ns !== '') requireNamespaceName(ns);
  const id = resolveJobId(req.jobId, ns);
  if (id === undefined) throw invalid('namespace', `job ${req.jobId.slice(0, 100)} is of namespace ${namespaceOfJob(req.jobId)}, not ${ns}`);
  return id;
}

export function requireId(id: string): string {
  if (!/^([a-z0-9][-a-z0-9]{0,62}\/)?[A-Za-z0-9._-]{1,200}$/.test(id)) throw invalid('job_id', 'must be a job id as SubmitJob returned it');
  return id;
}
