// Original file: proto/tarcil/v1/scheduler.proto

import type { JobSpec as _tarcil_v1_JobSpec, JobSpec__Output as _tarcil_v1_JobSpec__Output } from '../../tarcil/v1/JobSpec.ts';

export interface SubmitJobRequest {
  'spec'?: (_tarcil_v1_JobSpec | null);
  /**
   * Alternative to spec: the JSON text of a job spec file.
   */
  'specJson'?: (string);
  /**
   * Idempotency key chosen by the client (1-128 characters of A-Z a-z 0-9 . _ : -), optional. It
   * is stored with the job in the same transaction, so a retry after a lost answer gets the
   * original job back instead of creating a second one. Reusing a key for another spec is refused
   * with ALREADY_EXISTS.
   */
  'requestId'?: (string);
}

export interface SubmitJobRequest__Output {
  'spec': (_tarcil_v1_JobSpec__Output | null);
  /**
   * Alternative to spec: the JSON text of a job spec file.
   */
  'specJson': (string);
  /**
   * Idempotency key chosen by the client (1-128 characters of A-Z a-z 0-9 . _ : -), optional. It
   * is stored with the job in the same transaction, so a retry after a lost answer gets the
   * original job back instead of creating a second one. Reusing a key for another spec is refused
   * with ALREADY_EXISTS.
   */
  'requestId': (string);
}
