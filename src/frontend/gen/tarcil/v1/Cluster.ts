// Original file: proto/tarcil/v1/scheduler.proto

import type { Server as _tarcil_v1_Server, Server__Output as _tarcil_v1_Server__Output } from '../../tarcil/v1/Server.ts';
import type { Bucket as _tarcil_v1_Bucket, Bucket__Output as _tarcil_v1_Bucket__Output } from '../../tarcil/v1/Bucket.ts';

export interface Cluster {
  'servers'?: (_tarcil_v1_Server)[];
  'rus'?: (number);
  'free'?: (number);
  'busy'?: (number);
  'down'?: (number);
  'buckets'?: (_tarcil_v1_Bucket)[];
  'queuedJobs'?: (number);
  'activeJobs'?: (number);
}

export interface Cluster__Output {
  'servers': (_tarcil_v1_Server__Output)[];
  'rus': (number);
  'free': (number);
  'busy': (number);
  'down': (number);
  'buckets': (_tarcil_v1_Bucket__Output)[];
  'queuedJobs': (number);
  'activeJobs': (number);
}
