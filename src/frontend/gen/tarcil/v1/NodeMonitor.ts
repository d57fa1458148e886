// Original file: proto/tarcil/v1/monitor.proto

import type * as grpc from '@grpc/grpc-js'
import type { MethodDefinition } from '@grpc/proto-loader'
import type { GetStatsRequest as _tarcil_v1_GetStatsRequest, GetStatsRequest__Output as _tarcil_v1_GetStatsRequest__Output } from '../../tarcil/v1/GetStatsRequest.ts';
import type { KillTaskRequest as _tarcil_v1_KillTaskRequest, KillTaskRequest__Output as _tarcil_v1_KillTaskRequest__Output } from '../../tarcil/v1/KillTaskRequest.ts';
import type { KillTaskResponse as _tarcil_v1_KillTaskResponse, KillTaskResponse__Output as _tarcil_v1_KillTaskResponse__Output } from '../../tarcil/v1/KillTaskResponse.ts';
import type { LaunchTaskRequest as _tarcil_v1_LaunchTaskRequest, LaunchTaskRequest__Output as _tarcil_v1_LaunchTaskRequest__Output } from '../../tarcil/v1/LaunchTaskRequest.ts';
import type { LaunchTaskResponse as _tarcil_v1_LaunchTaskResponse, LaunchTaskResponse__Output as _tarcil_v1_LaunchTaskResponse__Output } from '../../tarcil/v1/LaunchTaskResponse.ts';
import type { NodeStats as _tarcil_v1_NodeStats, NodeStats__Output as _tarcil_v1_NodeStats__Output } from '../../tarcil/v1/NodeStats.ts';

export interface NodeMonitorClient extends grpc.Client {
  GetStats(argument: _tarcil_v1_GetStatsRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_tarcil_v1_NodeStats__Output>): grpc.ClientUnaryCall;
  GetStats(argument: _tarcil_v1_GetStatsRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_tarcil_v1_NodeStats__Output>): grpc.ClientUnaryCall;
  GetStats(argument: _tarcil_v1_GetStatsRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_tarcil_v1_NodeStats__Output>): grpc.ClientUnaryCall;
  GetStats(argument: _tarcil_v1_GetStatsRequest, callback: grpc.requestCallback<_tarcil_v1_NodeStats__Output>): grpc.ClientUnaryCall;
  getStats(argument: _tarcil_v1_GetStatsRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_tarcil_v1_NodeStats__Output>): grpc.ClientUnaryCall;
  getStats(argument: _tarcil_v1_GetStatsRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_tarcil_v1_NodeStats__Output>): grpc.ClientUnaryCall;
  getStats(argument: _tarcil_v1_GetStatsRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_tarcil_v1_NodeStats__Output>): grpc.ClientUnaryCall;
  getStats(argument: _tarcil_v1_GetStatsRequest, callback: grpc.requestCallback<_tarcil_v1_NodeStats__Output>): grpc.ClientUnaryCall;
  
  KillTask(argument: _tarcil_v1_KillTaskRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_tarcil_v1_KillTaskResponse__Output>): grpc.ClientUnaryCall;
  KillTask(argument: _tarcil_v1_KillTaskRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_tarcil_v1_KillTaskResponse__Output>): grpc.ClientUnaryCall;
  KillTask(argument: _tarcil_v1_KillTaskRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_tarcil_v1_KillTaskResponse__Output>): grpc.ClientUnaryCall;
  KillTask(argument: _tarcil_v1_KillTaskRequest, callback: grpc.requestCallback<_tarcil_v1_KillTaskResponse__Output>): grpc.ClientUnaryCall;
  killTask(argument: _tarcil_v1_KillTaskRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_tarcil_v1_KillTaskResponse__Output>): grpc.ClientUnaryCall;
  killTask(argument: _tarcil_v1_KillTaskRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_tarcil_v1_KillTaskResponse__Output>): grpc.ClientUnaryCall;
  killTask(argument: _tarcil_v1_KillTaskRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_tarcil_v1_KillTaskResponse__Output>): grpc.ClientUnaryCall;
  killTask(argument: _tarcil_v1_KillTaskRequest, callback: grpc.requestCallback<_tarcil_v1_KillTaskResponse__Output>): grpc.ClientUnaryCall;
  
  LaunchTask(argument: _tarcil_v1_LaunchTaskRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_tarcil_v1_LaunchTaskResponse__Output>): grpc.ClientUnaryCall;
  LaunchTask(argument: _tarcil_v1_LaunchTaskRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_tarcil_v1_LaunchTaskResponse__Output>): grpc.ClientUnaryCall;
  LaunchTask(argument: _tarcil_v1_LaunchTaskRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_tarcil_v1_LaunchTaskResponse__Output>): grpc.ClientUnaryCall;
  LaunchTask(argument: _tarcil_v1_LaunchTaskRequest, callback: grpc.requestCallback<_tarcil_v1_LaunchTaskResponse__Output>): grpc.ClientUnaryCall;
  launchTask(argument: _tarcil_v1_LaunchTaskRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_tarcil_v1_LaunchTaskResponse__Output>): grpc.ClientUnaryCall;
  launchTask(argument: _tarcil_v1_LaunchTaskRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_tarcil_v1_LaunchTaskResponse__Output>): grpc.ClientUnaryCall;
  launchTask(argument: _tarcil_v1_LaunchTaskRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_tarcil_v1_LaunchTaskResponse__Output>): grpc.ClientUnaryCall;
  launchTask(argument: _tarcil_v1_LaunchTaskRequest, callback: grpc.requestCallback<_tarcil_v1_LaunchTaskResponse__Output>): grpc.ClientUnaryCall;
  
}

export interface NodeMonitorHandlers extends grpc.UntypedServiceImplementation {
  GetStats: grpc.handleUnaryCall<_tarcil_v1_GetStatsRequest__Output, _tarcil_v1_NodeStats>;
  
  KillTask: grpc.handleUnaryCall<_tarcil_v1_KillTaskRequest__Output, _tarcil_v1_KillTaskResponse>;
  
  LaunchTask: grpc.handleUnaryCall<_tarcil_v1_LaunchTaskRequest__Output, _tarcil_v1_LaunchTaskResponse>;
  
}

export interface NodeMonitorDefinition extends grpc.ServiceDefinition {
  GetStats: MethodDefinition<_tarcil_v1_GetStatsRequest, _tarcil_v1_NodeStats, _tarcil_v1_GetStatsRequest__Output, _tarcil_v1_NodeStats__Output>
  KillTask: MethodDefinition<_tarcil_v1_KillTaskRequest, _tarcil_v1_KillTaskResponse, _tarcil_v1_KillTaskRequest__Output, _tarcil_v1_KillTaskResponse__Output>
  LaunchTask: MethodDefinition<_tarcil_v1_LaunchTaskRequest, _tarcil_v1_LaunchTaskResponse, _tarcil_v1_LaunchTaskRequest__Output, _tarcil_v1_LaunchTaskResponse__Output>
}
