// Original file: proto/tarcil/v1/scheduler.proto


export interface Command {
  'argv'?: (string)[];
  'env'?: ({[key: string]: string});
}

export interface Command__Output {
  'argv': (string)[];
  'env': ({[key: string]: string});
}
