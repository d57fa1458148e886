// Original file: proto/tarcil/v1/scheduler.proto


export interface Constraints {
  'platforms'?: (string)[];
  'attributes'?: ({[key: string]: string});
  'dataServers'?: (string)[];
}

export interface Constraints__Output {
  'platforms': (string)[];
  'attributes': ({[key: string]: string});
  'dataServers': (string)[];
}
