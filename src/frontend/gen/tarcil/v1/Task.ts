// Original file: proto/tarcil/v1/scheduler.proto

import type { RuRef as _tarcil_v1_RuRef, RuRef__Output as _tarcil_v1_RuRef__Output } from '../../tarcil/v1/RuRef.ts';

export interface Task {
  'index'?: (number);
  /**
   * queued | placed | running | succeeded | failed | cancelled | lost
   */
  'state'?: (string);
  'ru'?: (_tarcil_v1_RuRef | null);
  'attempt'?: (number);
  'placedAtMs'?: (number | string);
  'startedAtMs'?: (number | string);
  'endedAtMs'?: (number | string);
  'exitCode'?: (number);
  'message'?: (string);
  'logPath'?: (string);
  '_exitCode'?: "exitCode";
}

export interface Task__Output {
  'index': (number);
  /**
   * queued | placed | running | succeeded | failed | cancelled | lost
   */
  'state': (string);
  'ru': (_tarcil_v1_RuRef__Output | null);
  'attempt': (number);
  'placedAtMs': (number);
  'startedAtMs': (number);
  'endedAtMs': (number);
  'exitCode'?: (number);
  'message': (string);
  'logPath': (string);
  '_exitCode'?: "exitCode";
}
