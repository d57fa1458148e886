// Original file: proto/tarcil/v1/monitor.proto

import type { RunningTask as _tarcil_v1_RunningTask, RunningTask__Output as _tarcil_v1_RunningTask__Output } from '../../tarcil/v1/RunningTask.ts';
import type { Long } from '@grpc/proto-loader';

export interface NodeStats {
  'server'?: (string);
  'platform'?: (string);
  'executor'?: (string);
  'rus'?: (number);
  'busy'?: (number);
  'blocked'?: (boolean);
  'running'?: (_tarcil_v1_RunningTask)[];
  'started'?: (number | string | Long);
  'completed'?: (number | string | Long);
  'failed'?: (number | string | Long);
  'killed'?: (number | string | Long);
  'fenced'?: (number | string | Long);
}

export interface NodeStats__Output {
  'server': (string);
  'platform': (string);
  'executor': (string);
  'rus': (number);
  'busy': (number);
  'blocked': (boolean);
  'running': (_tarcil_v1_RunningTask__Output)[];
  'started': (number);
  'completed': (number);
  'failed': (number);
  'killed': (number);
  'fenced': (number);
}
