// Original file: proto/tarcil/v1/scheduler.proto


export interface Ru {
  'index'?: (number);
  /**
   * free | busy | reserved | down
   */
  'state'?: (string);
  'job'?: (string);
  'task'?: (number);
}

export interface Ru__Output {
  'index': (number);
  /**
   * free | busy | reserved | down
   */
  'state': (string);
  'job': (string);
  'task': (number);
}
