// Original file: proto/tarcil/v1/scheduler.proto

import type * as grpc from '@grpc/grpc-js'
import type { MethodDefinition } from '@grpc/proto-loader'
import type { CancelJobRequest as _tarcil_v1_CancelJobRequest, CancelJobRequest__Output as _tarcil_v1_CancelJobRequest__Output } from '../../tarcil/v1/CancelJobRequest.ts';
import type { Cluster as _tarcil_v1_Cluster, Cluster__Output as _tarcil_v1_Cluster__Output } from '../../tarcil/v1/Cluster.ts';
import type { ExplainJobRequest as _tarcil_v1_ExplainJobRequest, ExplainJobRequest__Output as _tarcil_v1_ExplainJobRequest__Output } from '../../tarcil/v1/ExplainJobRequest.ts';
import type { Explanation as _tarcil_v1_Explanation, Explanation__Output as _tarcil_v1_Explanation__Output } from '../../tarcil/v1/Explanation.ts';
import type { GetClusterRequest as _tarcil_v1_GetClusterRequest, GetClusterRequest__Output as _tarcil_v1_GetClusterRequest__Output } from '../../tarcil/v1/GetClusterRequest.ts';
import type { GetJobRequest as _tarcil_v1_GetJobRequest, GetJobRequest__Output as _tarcil_v1_GetJobRequest__Output } from '../../tarcil/v1/GetJobRequest.ts';
import type { Job as _tarcil_v1_Job, Job__Output as _tarcil_v1_Job__Output } from '../../tarcil/v1/Job.ts';
import type { JobEvent as _tarcil_v1_JobEvent, JobEvent__Output as _tarcil_v1_JobEvent__Output } from '../../tarcil/v1/JobEvent.ts';
import type { ListJobsRequest as _tarcil_v1_ListJobsRequest, ListJobsRequest__Output as _tarcil_v1_ListJobsRequest__Output } from '../../tarcil/v1/ListJobsRequest.ts';
import type { ListJobsResponse as _tarcil_v1_ListJobsResponse, ListJobsResponse__Output as _tarcil_v1_ListJobsResponse__Output } from '../../tarcil/v1/ListJobsResponse.ts';
import type { SubmitJobRequest as _tarcil_v1_SubmitJobRequest, SubmitJobRequest__Output as _tarcil_v1_SubmitJobRequest__Output } from '../../tarcil/v1/SubmitJobRequest.ts';
import type { SubmitJobResponse as _tarcil_v1_SubmitJobResponse, SubmitJobResponse__Output as _tarcil_v1_SubmitJobResponse__Output } from '../../tarcil/v1/SubmitJobResponse.ts';
import type { WatchJobRequest as _tarcil_v1_WatchJobRequest, WatchJobRequest__Output as _tarcil_v1_WatchJobRequest__Output } from '../../tarcil/v1/WatchJobRequest.ts';

export interface SchedulerClient extends grpc.Client {
  CancelJob(argument: _tarcil_v1_CancelJobRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_tarcil_v1_Job__Output>): grpc.ClientUnaryCall;
  CancelJob(argument: _tarcil_v1_CancelJobRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_tarcil_v1_Job__Output>): grpc.ClientUnaryCall;
  CancelJob(argument: _tarcil_v1_CancelJobRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_tarcil_v1_Job__Output>): grpc.ClientUnaryCall;
  CancelJob(argument: _tarcil_v1_CancelJobRequest, callback: grpc.requestCallback<_tarcil_v1_Job__Output>): grpc.ClientUnaryCall;
  cancelJob(argument: _tarcil_v1_CancelJobRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_tarcil_v1_Job__Output>): grpc.ClientUnaryCall;
  cancelJob(argument: _tarcil_v1_CancelJobRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_tarcil_v1_Job__Output>): grpc.ClientUnaryCall;
  cancelJob(argument: _tarcil_v1_CancelJobRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_tarcil_v1_Job__Output>): grpc.ClientUnaryCall;
  cancelJob(argument: _tarcil_v1_CancelJobRequest, callback: grpc.requestCallback<_tarcil_v1_Job__Output>): grpc.ClientUnaryCall;
  
  /**
   * Why a job waits, or where it went and why.
   */
  ExplainJob(argument: _tarcil_v1_ExplainJobRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_tarcil_v1_Explanation__Output>): grpc.ClientUnaryCall;
  ExplainJob(argument: _tarcil_v1_ExplainJobRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_tarcil_v1_Explanation__Output>): grpc.ClientUnaryCall;
  ExplainJob(argument: _tarcil_v1_ExplainJobRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_tarcil_v1_Explanation__Output>): grpc.ClientUnaryCall;
  ExplainJob(argument: _tarcil_v1_ExplainJobRequest, callback: grpc.requestCallback<_tarcil_v1_Explanation__Output>): grpc.ClientUnaryCall;
  /**
   * Why a job waits, or where it went and why.
   */
  explainJob(argument: _tarcil_v1_ExplainJobRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_tarcil_v1_Explanation__Output>): grpc.ClientUnaryCall;
  explainJob(argument: _tarcil_v1_ExplainJobRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_tarcil_v1_Explanation__Output>): grpc.ClientUnaryCall;
  explainJob(argument: _tarcil_v1_ExplainJobRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_tarcil_v1_Explanation__Output>): grpc.ClientUnaryCall;
  explainJob(argument: _tarcil_v1_ExplainJobRequest, callback: grpc.requestCallback<_tarcil_v1_Explanation__Output>): grpc.ClientUnaryCall;
  
  GetCluster(argument: _tarcil_v1_GetClusterRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_tarcil_v1_Cluster__Output>): grpc.ClientUnaryCall;
  GetCluster(argument: _tarcil_v1_GetClusterRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_tarcil_v1_Cluster__Output>): grpc.ClientUnaryCall;
  GetCluster(argument: _tarcil_v1_GetClusterRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_tarcil_v1_Cluster__Output>): grpc.ClientUnaryCall;
  GetCluster(argument: _tarcil_v1_GetClusterRequest, callback: grpc.requestCallback<_tarcil_v1_Cluster__Output>): grpc.ClientUnaryCall;
  getCluster(argument: _tarcil_v1_GetClusterRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_tarcil_v1_Cluster__Output>): grpc.ClientUnaryCall;
  getCluster(argument: _tarcil_v1_GetClusterRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_tarcil_v1_Cluster__Output>): grpc.ClientUnaryCall;
  getCluster(argument: _tarcil_v1_GetClusterRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_tarcil_v1_Cluster__Output>): grpc.ClientUnaryCall;
  getCluster(argument: _tarcil_v1_GetClusterRequest, callback: grpc.requestCallback<_tarcil_v1_Cluster__Output>): grpc.ClientUnaryCall;
  
  GetJob(argument: _tarcil_v1_GetJobRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_tarcil_v1_Job__Output>): grpc.ClientUnaryCall;
  GetJob(argument: _tarcil_v1_GetJobRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_tarcil_v1_Job__Output>): grpc.ClientUnaryCall;
  GetJob(argument: _tarcil_v1_GetJobRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_tarcil_v1_Job__Output>): grpc.ClientUnaryCall;
  GetJob(argument: _tarcil_v1_GetJobRequest, callback: grpc.requestCallback<_tarcil_v1_Job__Output>): grpc.ClientUnaryCall;
  getJob(argument: _tarcil_v1_GetJobRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_tarcil_v1_Job__Output>): grpc.ClientUnaryCall;
  getJob(argument: _tarcil_v1_GetJobRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_tarcil_v1_Job__Output>): grpc.ClientUnaryCall;
  getJob(argument: _tarcil_v1_GetJobRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_tarcil_v1_Job__Output>): grpc.ClientUnaryCall;
  getJob(argument: _tarcil_v1_GetJobRequest, callback: grpc.requestCallback<_tarcil_v1_Job__Output>): grpc.ClientUnaryCall;
  
  ListJobs(argument: _tarcil_v1_ListJobsRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_tarcil_v1_ListJobsResponse__Output>): grpc.ClientUnaryCall;
  ListJobs(argument: _tarcil_v1_ListJobsRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_tarcil_v1_ListJobsResponse__Output>): grpc.ClientUnaryCall;
  ListJobs(argument: _tarcil_v1_ListJobsRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_tarcil_v1_ListJobsResponse__Output>): grpc.ClientUnaryCall;
  ListJobs(argument: _tarcil_v1_ListJobsRequest, callback: grpc.requestCallback<_tarcil_v1_ListJobsResponse__Output>): grpc.ClientUnaryCall;
  listJobs(argument: _tarcil_v1_ListJobsRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_tarcil_v1_ListJobsResponse__Output>): grpc.ClientUnaryCall;
  listJobs(argument: _tarcil_v1_ListJobsRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_tarcil_v1_ListJobsResponse__Output>): grpc.ClientUnaryCall;
  listJobs(argument: _tarcil_v1_ListJobsRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_tarcil_v1_ListJobsResponse__Output>): grpc.ClientUnaryCall;
  listJobs(argument: _tarcil_v1_ListJobsRequest, callback: grpc.requestCallback<_tarcil_v1_ListJobsResponse__Output>): grpc.ClientUnaryCall;
  
  /**
   * Validates, persists, then answers: an acknowledged job is never lost. A valid job the cell
   * can never run (no server matches its constraints, a gang or a required spread larger than the
   * cell) is refused with FAILED_PRECONDITION naming the field; one that needs servers that are
   * down now is accepted and waits with the reason in Job.message, then fails after a bound.
   */
  SubmitJob(argument: _tarcil_v1_SubmitJobRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_tarcil_v1_SubmitJobResponse__Output>): grpc.ClientUnaryCall;
  SubmitJob(argument: _tarcil_v1_SubmitJobRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_tarcil_v1_SubmitJobResponse__Output>): grpc.ClientUnaryCall;
  SubmitJob(argument: _tarcil_v1_SubmitJobRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_tarcil_v1_SubmitJobResponse__Output>): grpc.ClientUnaryCall;
  SubmitJob(argument: _tarcil_v1_SubmitJobRequest, callback: grpc.requestCallback<_tarcil_v1_SubmitJobResponse__Output>): grpc.ClientUnaryCall;
  /**
   * Validates, persists, then answers: an acknowledged job is never lost. A valid job the cell
   * can never run (no server matches its constraints, a gang or a required spread larger than the
   * cell) is refused with FAILED_PRECONDITION naming the field; one that needs servers that are
   * down now is accepted and waits with the reason in Job.message, then fails after a bound.
   */
  submitJob(argument: _tarcil_v1_SubmitJobRequest, metadata: grpc.Metadata, options: grpc.CallOptions, callback: grpc.requestCallback<_tarcil_v1_SubmitJobResponse__Output>): grpc.ClientUnaryCall;
  submitJob(argument: _tarcil_v1_SubmitJobRequest, metadata: grpc.Metadata, callback: grpc.requestCallback<_tarcil_v1_SubmitJobResponse__Output>): grpc.ClientUnaryCall;
  submitJob(argument: _tarcil_v1_SubmitJobRequest, options: grpc.CallOptions, callback: grpc.requestCallback<_tarcil_v1_SubmitJobResponse__Output>): grpc.ClientUnaryCall;
  submitJob(argument: _tarcil_v1_SubmitJobRequest, callback: grpc.requestCallback<_tarcil_v1_SubmitJobResponse__Output>): grpc.ClientUnaryCall;
  
  /**
   * The job now, then every change until it reaches a final state. Events carry the job's
   * summary and only the tasks that changed (see JobEvent). NOT_FOUND at once for an unknown job;
   * a client that reads too slowly is dropped with RESOURCE_EXHAUSTED rather than buffered.
   */
  WatchJob(argument: _tarcil_v1_WatchJobRequest, metadata: grpc.Metadata, options?: grpc.CallOptions): grpc.ClientReadableStream<_tarcil_v1_JobEvent__Output>;
  WatchJob(argument: _tarcil_v1_WatchJobRequest, options?: grpc.CallOptions): grpc.ClientReadableStream<_tarcil_v1_JobEvent__Output>;
  /**
   * The job now, then every change until it reaches a final state. Events carry the job's
   * summary and only the tasks that changed (see JobEvent). NOT_FOUND at once for an unknown job;
   * a client that reads too slowly is dropped with RESOURCE_EXHAUSTED rather than buffered.
   */
  watchJob(argument: _tarcil_v1_WatchJobRequest, metadata: grpc.Metadata, options?: grpc.CallOptions): grpc.ClientReadableStream<_tarcil_v1_JobEvent__Output>;
  watchJob(argument: _tarcil_v1_WatchJobRequest, options?: grpc.CallOptions): grpc.ClientReadableStream<_tarcil_v1_JobEvent__Output>;
  
}

export interface SchedulerHandlers extends grpc.UntypedServiceImplementation {
  CancelJob: grpc.handleUnaryCall<_tarcil_v1_CancelJobRequest__Output, _tarcil_v1_Job>;
  
  /**
   * Why a job waits, or where it went and why.
   */
  ExplainJob: grpc.handleUnaryCall<_tarcil_v1_ExplainJobRequest__Output, _tarcil_v1_Explanation>;
  
  GetCluster: grpc.handleUnaryCall<_tarcil_v1_GetClusterRequest__Output, _tarcil_v1_Cluster>;
  
  GetJob: grpc.handleUnaryCall<_tarcil_v1_GetJobRequest__Output, _tarcil_v1_Job>;
  
  ListJobs: grpc.handleUnaryCall<_tarcil_v1_ListJobsRequest__Output, _tarcil_v1_ListJobsResponse>;
  
  /**
   * Validates, persists, then answers: an acknowledged job is never lost. A valid job the cell
   * can never run (no server matches its constraints, a gang or a required spread larger than the
   * cell) is refused with FAILED_PRECONDITION naming the field; one that needs servers that are
   * down now is accepted and waits with the reason in Job.message, then fails after a bound.
   */
  SubmitJob: grpc.handleUnaryCall<_tarcil_v1_SubmitJobRequest__Output, _tarcil_v1_SubmitJobResponse>;
  
  /**
   * The job now, then every change until it reaches a final state. Events carry the job's
   * summary and only the tasks that changed (see JobEvent). NOT_FOUND at once for an unknown job;
   * a client that reads too slowly is dropped with RESOURCE_EXHAUSTED rather than buffered.
   */
  WatchJob: grpc.handleServerStreamingCall<_tarcil_v1_WatchJobRequest__Output, _tarcil_v1_JobEvent>;
  
}

export interface SchedulerDefinition extends grpc.ServiceDefinition {
  CancelJob: MethodDefinition<_tarcil_v1_CancelJobRequest, _tarcil_v1_Job, _tarcil_v1_CancelJobRequest__Output, _tarcil_v1_Job__Output>
  ExplainJob: MethodDefinition<_tarcil_v1_ExplainJobRequest, _tarcil_v1_Explanation, _tarcil_v1_ExplainJobRequest__Output, _tarcil_v1_Explanation__Output>
  GetCluster: MethodDefinition<_tarcil_v1_GetClusterRequest, _tarcil_v1_Cluster, _tarcil_v1_GetClusterRequest__Output, _tarcil_v1_Cluster__Output>
  GetJob: MethodDefinition<_tarcil_v1_GetJobRequest, _tarcil_v1_Job, _tarcil_v1_GetJobRequest__Output, _tarcil_v1_Job__Output>
  ListJobs: MethodDefinition<_tarcil_v1_ListJobsRequest, _tarcil_v1_ListJobsResponse, _tarcil_v1_ListJobsRequest__Output, _tarcil_v1_ListJobsResponse__Output>
  SubmitJob: MethodDefinition<_tarcil_v1_SubmitJobRequest, _tarcil_v1_SubmitJobResponse, _tarcil_v1_SubmitJobRequest__Output, _tarcil_v1_SubmitJobResponse__Output>
  WatchJob: MethodDefinition<_tarcil_v1_WatchJobRequest, _tarcil_v1_JobEvent, _tarcil_v1_WatchJobRequest__Output, _tarcil_v1_JobEvent__Output>
}
