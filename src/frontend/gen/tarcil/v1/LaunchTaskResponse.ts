// Original file: proto/tarcil/v1/monitor.proto


export interface LaunchTaskResponse {
  /**
   * started | already-running | not-assigned (the RU no longer names this task)
   */
  'status'?: (string);
}

export interface LaunchTaskResponse__Output {
  /**
   * started | already-running | not-assigned (the RU no longer names this task)
   */
  'status': (string);
}
