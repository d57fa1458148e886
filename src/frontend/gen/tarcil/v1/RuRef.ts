// Original file: proto/tarcil/v1/scheduler.proto


export interface RuRef {
  'server'?: (string);
  'index'?: (number);
}

export interface RuRef__Output {
  'server': (string);
  'index': (number);
}
