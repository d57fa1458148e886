// Original file: proto/tarcil/v1/scheduler.proto


export interface CancelJobRequest {
  'jobId'?: (string);
}

export interface CancelJobRequest__Output {
  'jobId': (string);
}
