// Original file: proto/tarcil/v1/scheduler.proto


export interface WatchJobRequest {
  'jobId'?: (string);
}

export interface WatchJobRequest__Output {
  'jobId': (string);
}
