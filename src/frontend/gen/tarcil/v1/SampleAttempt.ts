// Original file: proto/tarcil/v1/scheduler.proto


export interface SampleAttempt {
  'r'?: (number);
  'f'?: (number | string);
  'candidates'?: (number);
}

export interface SampleAttempt__Output {
  'r': (number);
  'f': (number);
  'candidates': (number);
}
