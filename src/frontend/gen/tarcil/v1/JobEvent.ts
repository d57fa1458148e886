// Original file: proto/tarcil/v1/scheduler.proto

import type { Job as _tarcil_v1_Job, Job__Output as _tarcil_v1_Job__Output } from '../../tarcil/v1/Job.ts';
import type { Task as _tarcil_v1_Task, Task__Output as _tarcil_v1_Task__Output } from '../../tarcil/v1/Task.ts';
import type { Long } from '@grpc/proto-loader';

/**
 * One change of a watched job. `job` is the summary (state, counts, message; its task_list is
 * empty); `tasks` holds the tasks whose records changed since the previous event (the first event
 * holds every task that has a record). An event describes the job at store revision `revision`.
 * A large change is sent in several parts with the same revision, `more` set on all but the last;
 * after the last part that revision never appears again, so revisions along a stream increase.
 */
export interface JobEvent {
  'job'?: (_tarcil_v1_Job | null);
  'revision'?: (number | string | Long);
  'tasks'?: (_tarcil_v1_Task)[];
  'more'?: (boolean);
}

/**
 * One change of a watched job. `job` is the summary (state, counts, message; its task_list is
 * empty); `tasks` holds the tasks whose records changed since the previous event (the first event
 * holds every task that has a record). An event describes the job at store revision `revision`.
 * A large change is sent in several parts with the same revision, `more` set on all but the last;
 * after the last part that revision never appears again, so revisions along a stream increase.
 */
export interface JobEvent__Output {
  'job': (_tarcil_v1_Job__Output | null);
  'revision': (number);
  'tasks': (_tarcil_v1_Task__Output)[];
  'more': (boolean);
}
