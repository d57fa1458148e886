// Original file: proto/tarcil/v1/monitor.proto


export interface KillTaskResponse {
  'killed'?: (boolean);
}

export interface KillTaskResponse__Output {
  'killed': (boolean);
}
