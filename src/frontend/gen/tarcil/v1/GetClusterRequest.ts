// Original file: proto/tarcil/v1/scheduler.proto


export interface GetClusterRequest {
}

export interface GetClusterRequest__Output {
}
