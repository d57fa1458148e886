// Original file: proto/tarcil/v1/scheduler.proto

import type { JobSpec as _tarcil_v1_JobSpec, JobSpec__Output as _tarcil_v1_JobSpec__Output } from '../../tarcil/v1/JobSpec.ts';

export interface SubmitJobRequest {
  'spec'?: (_tarcil_v1_JobSpec | null);
  /**
   * Alternative to spec: the JSON text of a job spec file.
   */
  'specJson'?: (string);
}

export interface SubmitJobRequest__Output {
  'spec': (_tarcil_v1_JobSpec__Output | null);
  /**
   * Alternative to spec: the JSON text of a job spec file.
   */
  'specJson': (string);
}
