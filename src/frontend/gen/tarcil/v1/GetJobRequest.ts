// Original file: proto/tarcil/v1/scheduler.proto


export interface GetJobRequest {
  'jobId'?: (string);
}

export interface GetJobRequest__Output {
  'jobId': (string);
}
