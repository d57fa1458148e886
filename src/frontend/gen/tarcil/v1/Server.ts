// Original file: proto/tarcil/v1/scheduler.proto

import type { Ru as _tarcil_v1_Ru, Ru__Output as _tarcil_v1_Ru__Output } from '../../tarcil/v1/Ru.ts';

export interface Server {
  'id'?: (string);
  'platform'?: (string);
  'rack'?: (string);
  /**
   * up | down | blocked
   */
  'state'?: (string);
  'endpoint'?: (string);
  'rus'?: (_tarcil_v1_Ru)[];
  'free'?: (number);
  'busy'?: (number);
}

export interface Server__Output {
  'id': (string);
  'platform': (string);
  'rack': (string);
  /**
   * up | down | blocked
   */
  'state': (string);
  'endpoint': (string);
  'rus': (_tarcil_v1_Ru__Output)[];
  'free': (number);
  'busy': (number);
}
