// Original file: proto/tarcil/v1/scheduler.proto


export interface ExplainJobRequest {
  'jobId'?: (string);
}

export interface ExplainJobRequest__Output {
  'jobId': (string);
}
