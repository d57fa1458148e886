import type * as grpc from '@grpc/grpc-js';
import type { MessageTypeDefinition } from '@grpc/proto-loader';

import type { GetStatsRequest as _tarcil_v1_GetStatsRequest, GetStatsRequest__Output as _tarcil_v1_GetStatsRequest__Output } from './tarcil/v1/GetStatsRequest.ts';
import type { KillTaskRequest as _tarcil_v1_KillTaskRequest, KillTaskRequest__Output as _tarcil_v1_KillTaskRequest__Output } from './tarcil/v1/KillTaskRequest.ts';
import type { KillTaskResponse as _tarcil_v1_KillTaskResponse, KillTaskResponse__Output as _tarcil_v1_KillTaskResponse__Output } from './tarcil/v1/KillTaskResponse.ts';
import type { LaunchTaskRequest as _tarcil_v1_LaunchTaskRequest, LaunchTaskRequest__Output as _tarcil_v1_LaunchTaskRequest__Output } from './tarcil/v1/LaunchTaskRequest.ts';
import type { LaunchTaskResponse as _tarcil_v1_LaunchTaskResponse, LaunchTaskResponse__Output as _tarcil_v1_LaunchTaskResponse__Output } from './tarcil/v1/LaunchTaskResponse.ts';
import type { NodeMonitorClient as _tarcil_v1_NodeMonitorClient, NodeMonitorDefinition as _tarcil_v1_NodeMonitorDefinition } from './tarcil/v1/NodeMonitor.ts';
import type { NodeStats as _tarcil_v1_NodeStats, NodeStats__Output as _tarcil_v1_NodeStats__Output } from './tarcil/v1/NodeStats.ts';
import type { RunningTask as _tarcil_v1_RunningTask, RunningTask__Output as _tarcil_v1_RunningTask__Output } from './tarcil/v1/RunningTask.ts';

type SubtypeConstructor<Constructor extends new (...args: any) => any, Subtype> = {
  new(...args: ConstructorParameters<Constructor>): Subtype;
};

export interface ProtoGrpcType {
  tarcil: {
    v1: {
      GetStatsRequest: MessageTypeDefinition<_tarcil_v1_GetStatsRequest, _tarcil_v1_GetStatsRequest__Output>
      KillTaskRequest: MessageTypeDefinition<_tarcil_v1_KillTaskRequest, _tarcil_v1_KillTaskRequest__Output>
      KillTaskResponse: MessageTypeDefinition<_tarcil_v1_KillTaskResponse, _tarcil_v1_KillTaskResponse__Output>
      LaunchTaskRequest: MessageTypeDefinition<_tarcil_v1_LaunchTaskRequest, _tarcil_v1_LaunchTaskRequest__Output>
      LaunchTaskResponse: MessageTypeDefinition<_tarcil_v1_LaunchTaskResponse, _tarcil_v1_LaunchTaskResponse__Output>
      NodeMonitor: SubtypeConstructor<typeof grpc.Client, _tarcil_v1_NodeMonitorClient> & { service: _tarcil_v1_NodeMonitorDefinition }
      NodeStats: MessageTypeDefinition<_tarcil_v1_NodeStats, _tarcil_v1_NodeStats__Output>
      RunningTask: MessageTypeDefinition<_tarcil_v1_RunningTask, _tarcil_v1_RunningTask__Output>
    }
  }
}

