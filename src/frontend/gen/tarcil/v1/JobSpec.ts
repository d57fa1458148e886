// Original file: proto/tarcil/v1/scheduler.proto

import type { InlineProfile as _tarcil_v1_InlineProfile, InlineProfile__Output as _tarcil_v1_InlineProfile__Output } from '../../tarcil/v1/InlineProfile.ts';
import type { Locality as _tarcil_v1_Locality, Locality__Output as _tarcil_v1_Locality__Output } from '../../tarcil/v1/Locality.ts';
import type { Constraints as _tarcil_v1_Constraints, Constraints__Output as _tarcil_v1_Constraints__Output } from '../../tarcil/v1/Constraints.ts';
import type { Command as _tarcil_v1_Command, Command__Output as _tarcil_v1_Command__Output } from '../../tarcil/v1/Command.ts';

export interface JobSpec {
  'name'?: (string);
  /**
   * a workload profile of profiles/workloads
   */
  'profileName'?: (string);
  'inlineProfile'?: (_tarcil_v1_InlineProfile | null);
  'tasks'?: (number | string);
  'priority'?: (number | string);
  /**
   * incremental | gang
   */
  'mode'?: (string);
  'locality'?: (_tarcil_v1_Locality | null);
  'constraints'?: (_tarcil_v1_Constraints | null);
  'maxQueueMs'?: (number | string);
  /**
   * Per task: a duration for the simulated executor, or a command for the process executor.
   */
  'durationMs'?: (number | string);
  'command'?: (_tarcil_v1_Command | null);
  '_name'?: "name";
  'profile'?: "profileName"|"inlineProfile";
  '_tasks'?: "tasks";
  '_priority'?: "priority";
  '_mode'?: "mode";
  '_maxQueueMs'?: "maxQueueMs";
  '_durationMs'?: "durationMs";
}

export interface JobSpec__Output {
  'name'?: (string);
  /**
   * a workload profile of profiles/workloads
   */
  'profileName'?: (string);
  'inlineProfile'?: (_tarcil_v1_InlineProfile__Output | null);
  'tasks'?: (number);
  'priority'?: (number);
  /**
   * incremental | gang
   */
  'mode'?: (string);
  'locality': (_tarcil_v1_Locality__Output | null);
  'constraints': (_tarcil_v1_Constraints__Output | null);
  'maxQueueMs'?: (number);
  /**
   * Per task: a duration for the simulated executor, or a command for the process executor.
   */
  'durationMs'?: (number);
  'command': (_tarcil_v1_Command__Output | null);
  '_name'?: "name";
  'profile'?: "profileName"|"inlineProfile";
  '_tasks'?: "tasks";
  '_priority'?: "priority";
  '_mode'?: "mode";
  '_maxQueueMs'?: "maxQueueMs";
  '_durationMs'?: "durationMs";
}
