// Original file: proto/tarcil/v1/scheduler.proto

import type { Job as _tarcil_v1_Job, Job__Output as _tarcil_v1_Job__Output } from '../../tarcil/v1/Job.ts';

export interface ListJobsResponse {
  'jobs'?: (_tarcil_v1_Job)[];
}

export interface ListJobsResponse__Output {
  'jobs': (_tarcil_v1_Job__Output)[];
}
