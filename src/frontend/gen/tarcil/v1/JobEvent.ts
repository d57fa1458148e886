// Original file: proto/tarcil/v1/scheduler.proto

import type { Job as _tarcil_v1_Job, Job__Output as _tarcil_v1_Job__Output } from '../../tarcil/v1/Job.ts';
import type { Long } from '@grpc/proto-loader';

export interface JobEvent {
  'job'?: (_tarcil_v1_Job | null);
  'revision'?: (number | string | Long);
}

export interface JobEvent__Output {
  'job': (_tarcil_v1_Job__Output | null);
  'revision': (number);
}
