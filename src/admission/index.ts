/**
 * Admission control (paper §4): the LSH buckets, their free counters, and the verdict of whether a
 * job waits or goes.
 */
export { ContentionLsh, DEFAULT_BUCKETS, type BucketInfo, type LshOptions } from './lsh.ts';
export { EXACT_ERLANG_MAX_K, erlangQuantile } from './erlang.ts';
export {
  AdmissionCounters,
  type AdmissionOptions,
  type AdmissionVerdict,
  type PreparedContention,
  type BucketSnapshot,
  type FreeFraction,
  type VerdictOptions,
  type WaitEstimate,
} from './counters.ts';
