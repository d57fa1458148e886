// Original file: proto/tarcil/v1/monitor.proto

import type { Long } from '@grpc/proto-loader';

export interface LaunchTaskRequest {
  'job'?: (string);
  'task'?: (number);
  'ruIndex'?: (number);
  /**
   * Store revision of the commit that placed the task: the monitor reads at least this.
   */
  'revision'?: (number | string | Long);
}

export interface LaunchTaskRequest__Output {
  'job': (string);
  'task': (number);
  'ruIndex': (number);
  /**
   * Store revision of the commit that placed the task: the monitor reads at least this.
   */
  'revision': (number);
}
