// Original file: proto/tarcil/v1/scheduler.proto

import type { Task as _tarcil_v1_Task, Task__Output as _tarcil_v1_Task__Output } from '../../tarcil/v1/Task.ts';
import type { LoadReport as _tarcil_v1_LoadReport, LoadReport__Output as _tarcil_v1_LoadReport__Output } from '../../tarcil/v1/LoadReport.ts';

export interface Job {
  'id'?: (string);
  'name'?: (string);
  /**
   * queued | admitted | placed | running | succeeded | failed | cancelled
   */
  'state'?: (string);
  'profile'?: (string);
  'tasks'?: (number);
  'priority'?: (number);
  'mode'?: (string);
  'owner'?: (string);
  'submittedAtMs'?: (number | string);
  'updatedAtMs'?: (number | string);
  'finishedAtMs'?: (number | string);
  'message'?: (string);
  'taskStates'?: ({[key: string]: number});
  'taskList'?: (_tarcil_v1_Task)[];
  'rescheduled'?: (number);
  'cancelRequested'?: (boolean);
  'loadReports'?: (_tarcil_v1_LoadReport)[];
  /**
   * Tasks not in task_list: GetJob lists at most 5,000 tasks (the lowest indexes that have a
   * record); task_states counts them all, and WatchJob streams every one.
   */
  'tasksOmitted'?: (number);
}

export interface Job__Output {
  'id': (string);
  'name': (string);
  /**
   * queued | admitted | placed | running | succeeded | failed | cancelled
   */
  'state': (string);
  'profile': (string);
  'tasks': (number);
  'priority': (number);
  'mode': (string);
  'owner': (string);
  'submittedAtMs': (number);
  'updatedAtMs': (number);
  'finishedAtMs': (number);
  'message': (string);
  'taskStates': ({[key: string]: number});
  'taskList': (_tarcil_v1_Task__Output)[];
  'rescheduled': (number);
  'cancelRequested': (boolean);
  'loadReports': (_tarcil_v1_LoadReport__Output)[];
  /**
   * Tasks not in task_list: GetJob lists at most 5,000 tasks (the lowest indexes that have a
   * record); task_states counts them all, and WatchJob streams every one.
   */
  'tasksOmitted': (number);
}
