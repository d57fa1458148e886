/**
 * A placement request for selection tests: one of the test profiles' job on the test platforms,
 * with the fields a test does not name at their usual values.
 */
import { DEFAULT_PRIORITY } from '../../src/model/types.ts';
import { jobTarget } from '../../src/quality/index.ts';
import type { PlacementRequest } from '../../src/sampling/batch.ts';
import { TEST_PROFILES } from './jobs.ts';

export function placementRequest(over: Partial<PlacementRequest> = {}): PlacementRequest {
  const p = TEST_PROFILES[5]!;
  return {
    jobId: 'job',
    target: jobTarget(p.caused),
    caused: p.caused,
    priority: DEFAULT_PRIORITY,
    platformPerf: { 'r3.2xlarge': 1, 'c3.large': 0.8 },
    locality: { mode: 'any', scope: 'server' },
    constraints: {},
    m: 1,
    R: 8,
    ...over,
  };
}
