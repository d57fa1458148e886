// Original file: proto/tarcil/v1/monitor.proto


export interface GetStatsRequest {
}

export interface GetStatsRequest__Output {
}
