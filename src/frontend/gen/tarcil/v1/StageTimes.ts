// Original file: proto/tarcil/v1/scheduler.proto


export interface StageTimes {
  'admissionMs'?: (number | string);
  'sizeMs'?: (number | string);
  'selectMs'?: (number | string);
  'commitMs'?: (number | string);
  'queueMs'?: (number | string);
}

export interface StageTimes__Output {
  'admissionMs': (number);
  'sizeMs': (number);
  'selectMs': (number);
  'commitMs': (number);
  'queueMs': (number);
}
