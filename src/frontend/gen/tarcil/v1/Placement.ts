// Original file: proto/tarcil/v1/scheduler.proto

import type { RuRef as _tarcil_v1_RuRef, RuRef__Output as _tarcil_v1_RuRef__Output } from '../../tarcil/v1/RuRef.ts';
import type { Long } from '@grpc/proto-loader';

export interface Placement {
  'task'?: (number);
  'ru'?: (_tarcil_v1_RuRef | null);
  'q'?: (number | string);
  'acceptable'?: (boolean);
  'score'?: (number | string);
  'commitRevision'?: (number | string | Long);
  'preemptedJob'?: (string);
}

export interface Placement__Output {
  'task': (number);
  'ru': (_tarcil_v1_RuRef__Output | null);
  'q': (number);
  'acceptable': (boolean);
  'score': (number);
  'commitRevision': (number);
  'preemptedJob': (string);
}
