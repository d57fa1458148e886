// Original file: proto/tarcil/v1/monitor.proto


export interface KillTaskRequest {
  'job'?: (string);
  'task'?: (number);
  /**
   * cancelled | preempted
   */
  'reason'?: (string);
}

export interface KillTaskRequest__Output {
  'job': (string);
  'task': (number);
  /**
   * cancelled | preempted
   */
  'reason': (string);
}
