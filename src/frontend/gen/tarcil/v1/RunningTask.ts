// Original file: proto/tarcil/v1/monitor.proto


export interface RunningTask {
  'job'?: (string);
  'task'?: (number);
  'ruIndex'?: (number);
  'startedAtMs'?: (number | string);
  /**
   * Achieved rate relative to the expected one; 1 when the executor cannot tell.
   */
  'rate'?: (number | string);
  'pid'?: (number);
}

export interface RunningTask__Output {
  'job': (string);
  'task': (number);
  'ruIndex': (number);
  'startedAtMs': (number);
  /**
   * Achieved rate relative to the expected one; 1 when the executor cannot tell.
   */
  'rate': (number);
  'pid': (number);
}
