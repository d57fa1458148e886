// Original file: proto/tarcil/v1/scheduler.proto


export interface ListJobsRequest {
  /**
   * Only jobs in these states (all when empty).
   */
  'states'?: (string)[];
  'limit'?: (number);
}

export interface ListJobsRequest__Output {
  /**
   * Only jobs in these states (all when empty).
   */
  'states': (string)[];
  'limit': (number);
}
