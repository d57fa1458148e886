// Original file: proto/tarcil/v1/scheduler.proto

import type { Job as _tarcil_v1_Job, Job__Output as _tarcil_v1_Job__Output } from '../../tarcil/v1/Job.ts';

export interface SubmitJobResponse {
  'jobId'?: (string);
  'job'?: (_tarcil_v1_Job | null);
}

export interface SubmitJobResponse__Output {
  'jobId': (string);
  'job': (_tarcil_v1_Job__Output | null);
}
