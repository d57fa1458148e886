// Original file: proto/tarcil/v1/scheduler.proto


export interface Bucket {
  'id'?: (number);
  'free'?: (number);
  'rus'?: (number);
}

export interface Bucket__Output {
  'id': (number);
  'free': (number);
  'rus': (number);
}
