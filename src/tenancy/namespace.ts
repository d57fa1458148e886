/**
 * Namespaces: every job belongs to one. A job of namespace `ns` other than `default` has the id
 * `<ns>/<name>`, so its keys (jobs/, tasks/, queue/, owners/, decisions/, reports/) live under the
 * namespace; a job of `default` keeps a bare id, so jobs written before namespaces existed keep
 * working there.
 */

export const DEFAULT_NAMESPACE = 'default';

/** A namespace name: a DNS label (Kubernetes' rule), not shaped like a job id. */
export const NAMESPACE_RE = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;
export const NAMESPACE_RULE = "must be 1-63 lower-case letters, digits or '-', starting and ending with a letter or digit, and not starting with 'j-'";

/** The rule's violation, or undefined when `name` is a valid namespace name. */
export function namespaceProblem(name: string): string | undefined {
  // Bare job ids start with 'j-': a namespace of that shape could hold keys under a job's prefix.
  if (!NAMESPACE_RE.test(name) || name.startsWith('j-')) return NAMESPACE_RULE;
  return undefined;
}

/** The job id of `name` (a generated id) in namespace `ns`. */
export function qualifiedJobId(ns: string, name: string): string {
  return ns === DEFAULT_NAMESPACE ? name : `${ns}/${name}`;
}

/** The namespace a job id belongs to. */
export function namespaceOfJob(id: string): string {
  const slash = id.indexOf('/');
  return slash < 0 ? DEFAULT_NAMESPACE : id.slice(0, slash);
}

/** A job id without its namespace. */
export function jobName(id: string): string {
  const slash = id.indexOf('/');
  return slash < 0 ? id : id.slice(slash + 1);
}

/**
 * The job id a request names: `id` as given when it is qualified (`ns/j-…`), else in `ns` (the
 * request's namespace, default when empty). Undefined when a qualified id and a namespace
 * disagree; the caller says so.
 */
export function resolveJobId(id: string, ns: string): string | undefined {
  if (id.includes('/')) return ns === '' || namespaceOfJob(id) === ns ? id : undefined;
  return qualifiedJobId(ns === '' ? DEFAULT_NAMESPACE : ns, id);
}
