// Original file: proto/tarcil/v1/scheduler.proto

import type { AdmissionVerdict as _tarcil_v1_AdmissionVerdict, AdmissionVerdict__Output as _tarcil_v1_AdmissionVerdict__Output } from '../../tarcil/v1/AdmissionVerdict.ts';
import type { SampleAttempt as _tarcil_v1_SampleAttempt, SampleAttempt__Output as _tarcil_v1_SampleAttempt__Output } from '../../tarcil/v1/SampleAttempt.ts';
import type { Placement as _tarcil_v1_Placement, Placement__Output as _tarcil_v1_Placement__Output } from '../../tarcil/v1/Placement.ts';
import type { StageTimes as _tarcil_v1_StageTimes, StageTimes__Output as _tarcil_v1_StageTimes__Output } from '../../tarcil/v1/StageTimes.ts';

export interface Explanation {
  'jobId'?: (string);
  'state'?: (string);
  'agent'?: (string);
  /**
   * T_W: the job's target quality.
   */
  'target'?: (number | string);
  'admission'?: (_tarcil_v1_AdmissionVerdict)[];
  'samples'?: (_tarcil_v1_SampleAttempt)[];
  'placements'?: (_tarcil_v1_Placement)[];
  'conflicts'?: (number);
  'retries'?: (number);
  'readmissions'?: (number);
  'queuedMs'?: (number | string);
  'stages'?: (_tarcil_v1_StageTimes | null);
  /**
   * A readable account of the above.
   */
  'text'?: (string);
  'inProgress'?: (boolean);
  /**
   * Placements not listed in `placements` (a large job lists its first ones per decision).
   */
  'placementsOmitted'?: (number);
  /**
   * Why the job cannot be placed now, when something other than free capacity holds it (no
   * server it may use is up, a spread it cannot keep); empty otherwise.
   */
  'waitingFor'?: (string);
}

export interface Explanation__Output {
  'jobId': (string);
  'state': (string);
  'agent': (string);
  /**
   * T_W: the job's target quality.
   */
  'target': (number);
  'admission': (_tarcil_v1_AdmissionVerdict__Output)[];
  'samples': (_tarcil_v1_SampleAttempt__Output)[];
  'placements': (_tarcil_v1_Placement__Output)[];
  'conflicts': (number);
  'retries': (number);
  'readmissions': (number);
  'queuedMs': (number);
  'stages': (_tarcil_v1_StageTimes__Output | null);
  /**
   * A readable account of the above.
   */
  'text': (string);
  'inProgress': (boolean);
  /**
   * Placements not listed in `placements` (a large job lists its first ones per decision).
   */
  'placementsOmitted': (number);
  /**
   * Why the job cannot be placed now, when something other than free capacity holds it (no
   * server it may use is up, a spread it cannot keep); empty otherwise.
   */
  'waitingFor': (string);
}
