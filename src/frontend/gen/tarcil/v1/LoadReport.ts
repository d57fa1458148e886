// Original file: proto/tarcil/v1/scheduler.proto


export interface LoadReport {
  'task'?: (number);
  'server'?: (string);
  /**
   * Achieved rate relative to the expected one (1 = as expected).
   */
  'rate'?: (number | string);
  'atMs'?: (number | string);
}

export interface LoadReport__Output {
  'task': (number);
  'server': (string);
  /**
   * Achieved rate relative to the expected one (1 = as expected).
   */
  'rate': (number);
  'atMs': (number);
}
