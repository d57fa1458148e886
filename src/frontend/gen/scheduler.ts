import type * as grpc from '@grpc/grpc-js';
import type { MessageTypeDefinition } from '@grpc/proto-loader';

import type { AdmissionVerdict as _tarcil_v1_AdmissionVerdict, AdmissionVerdict__Output as _tarcil_v1_AdmissionVerdict__Output } from './tarcil/v1/AdmissionVerdict.ts';
import type { Bucket as _tarcil_v1_Bucket, Bucket__Output as _tarcil_v1_Bucket__Output } from './tarcil/v1/Bucket.ts';
import type { CancelJobRequest as _tarcil_v1_CancelJobRequest, CancelJobRequest__Output as _tarcil_v1_CancelJobRequest__Output } from './tarcil/v1/CancelJobRequest.ts';
import type { Cluster as _tarcil_v1_Cluster, Cluster__Output as _tarcil_v1_Cluster__Output } from './tarcil/v1/Cluster.ts';
import type { Command as _tarcil_v1_Command, Command__Output as _tarcil_v1_Command__Output } from './tarcil/v1/Command.ts';
import type { Constraints as _tarcil_v1_Constraints, Constraints__Output as _tarcil_v1_Constraints__Output } from './tarcil/v1/Constraints.ts';
import type { ExplainJobRequest as _tarcil_v1_ExplainJobRequest, ExplainJobRequest__Output as _tarcil_v1_ExplainJobRequest__Output } from './tarcil/v1/ExplainJobRequest.ts';
import type { Explanation as _tarcil_v1_Explanation, Explanation__Output as _tarcil_v1_Explanation__Output } from './tarcil/v1/Explanation.ts';
import type { GetClusterRequest as _tarcil_v1_GetClusterRequest, GetClusterRequest__Output as _tarcil_v1_GetClusterRequest__Output } from './tarcil/v1/GetClusterRequest.ts';
import type { GetJobRequest as _tarcil_v1_GetJobRequest, GetJobRequest__Output as _tarcil_v1_GetJobRequest__Output } from './tarcil/v1/GetJobRequest.ts';
import type { InlineProfile as _tarcil_v1_InlineProfile, InlineProfile__Output as _tarcil_v1_InlineProfile__Output } from './tarcil/v1/InlineProfile.ts';
import type { Job as _tarcil_v1_Job, Job__Output as _tarcil_v1_Job__Output } from './tarcil/v1/Job.ts';
import type { JobEvent as _tarcil_v1_JobEvent, JobEvent__Output as _tarcil_v1_JobEvent__Output } from './tarcil/v1/JobEvent.ts';
import type { JobSpec as _tarcil_v1_JobSpec, JobSpec__Output as _tarcil_v1_JobSpec__Output } from './tarcil/v1/JobSpec.ts';
import type { ListJobsRequest as _tarcil_v1_ListJobsRequest, ListJobsRequest__Output as _tarcil_v1_ListJobsRequest__Output } from './tarcil/v1/ListJobsRequest.ts';
import type { ListJobsResponse as _tarcil_v1_ListJobsResponse, ListJobsResponse__Output as _tarcil_v1_ListJobsResponse__Output } from './tarcil/v1/ListJobsResponse.ts';
import type { LoadReport as _tarcil_v1_LoadReport, LoadReport__Output as _tarcil_v1_LoadReport__Output } from './tarcil/v1/LoadReport.ts';
import type { Locality as _tarcil_v1_Locality, Locality__Output as _tarcil_v1_Locality__Output } from './tarcil/v1/Locality.ts';
import type { Placement as _tarcil_v1_Placement, Placement__Output as _tarcil_v1_Placement__Output } from './tarcil/v1/Placement.ts';
import type { Ru as _tarcil_v1_Ru, Ru__Output as _tarcil_v1_Ru__Output } from './tarcil/v1/Ru.ts';
import type { RuRef as _tarcil_v1_RuRef, RuRef__Output as _tarcil_v1_RuRef__Output } from './tarcil/v1/RuRef.ts';
import type { SampleAttempt as _tarcil_v1_SampleAttempt, SampleAttempt__Output as _tarcil_v1_SampleAttempt__Output } from './tarcil/v1/SampleAttempt.ts';
import type { SchedulerClient as _tarcil_v1_SchedulerClient, SchedulerDefinition as _tarcil_v1_SchedulerDefinition } from './tarcil/v1/Scheduler.ts';
import type { Server as _tarcil_v1_Server, Server__Output as _tarcil_v1_Server__Output } from './tarcil/v1/Server.ts';
import type { StageTimes as _tarcil_v1_StageTimes, StageTimes__Output as _tarcil_v1_StageTimes__Output } from './tarcil/v1/StageTimes.ts';
import type { SubmitJobRequest as _tarcil_v1_SubmitJobRequest, SubmitJobRequest__Output as _tarcil_v1_SubmitJobRequest__Output } from './tarcil/v1/SubmitJobRequest.ts';
import type { SubmitJobResponse as _tarcil_v1_SubmitJobResponse, SubmitJobResponse__Output as _tarcil_v1_SubmitJobResponse__Output } from './tarcil/v1/SubmitJobResponse.ts';
import type { Task as _tarcil_v1_Task, Task__Output as _tarcil_v1_Task__Output } from './tarcil/v1/Task.ts';
import type { WatchJobRequest as _tarcil_v1_WatchJobRequest, WatchJobRequest__Output as _tarcil_v1_WatchJobRequest__Output } from './tarcil/v1/WatchJobRequest.ts';

type SubtypeConstructor<Constructor extends new (...args: any) => any, Subtype> = {
  new(...args: ConstructorParameters<Constructor>): Subtype;
};

export interface ProtoGrpcType {
  tarcil: {
    v1: {
      AdmissionVerdict: MessageTypeDefinition<_tarcil_v1_AdmissionVerdict, _tarcil_v1_AdmissionVerdict__Output>
      Bucket: MessageTypeDefinition<_tarcil_v1_Bucket, _tarcil_v1_Bucket__Output>
      CancelJobRequest: MessageTypeDefinition<_tarcil_v1_CancelJobRequest, _tarcil_v1_CancelJobRequest__Output>
      Cluster: MessageTypeDefinition<_tarcil_v1_Cluster, _tarcil_v1_Cluster__Output>
      Command: MessageTypeDefinition<_tarcil_v1_Command, _tarcil_v1_Command__Output>
      Constraints: MessageTypeDefinition<_tarcil_v1_Constraints, _tarcil_v1_Constraints__Output>
      ExplainJobRequest: MessageTypeDefinition<_tarcil_v1_ExplainJobRequest, _tarcil_v1_ExplainJobRequest__Output>
      Explanation: MessageTypeDefinition<_tarcil_v1_Explanation, _tarcil_v1_Explanation__Output>
      GetClusterRequest: MessageTypeDefinition<_tarcil_v1_GetClusterRequest, _tarcil_v1_GetClusterRequest__Output>
      GetJobRequest: MessageTypeDefinition<_tarcil_v1_GetJobRequest, _tarcil_v1_GetJobRequest__Output>
      InlineProfile: MessageTypeDefinition<_tarcil_v1_InlineProfile, _tarcil_v1_InlineProfile__Output>
      Job: MessageTypeDefinition<_tarcil_v1_Job, _tarcil_v1_Job__Output>
      JobEvent: MessageTypeDefinition<_tarcil_v1_JobEvent, _tarcil_v1_JobEvent__Output>
      JobSpec: MessageTypeDefinition<_tarcil_v1_JobSpec, _tarcil_v1_JobSpec__Output>
      ListJobsRequest: MessageTypeDefinition<_tarcil_v1_ListJobsRequest, _tarcil_v1_ListJobsRequest__Output>
      ListJobsResponse: MessageTypeDefinition<_tarcil_v1_ListJobsResponse, _tarcil_v1_ListJobsResponse__Output>
      LoadReport: MessageTypeDefinition<_tarcil_v1_LoadReport, _tarcil_v1_LoadReport__Output>
      Locality: MessageTypeDefinition<_tarcil_v1_Locality, _tarcil_v1_Locality__Output>
      Placement: MessageTypeDefinition<_tarcil_v1_Placement, _tarcil_v1_Placement__Output>
      Ru: MessageTypeDefinition<_tarcil_v1_Ru, _tarcil_v1_Ru__Output>
      RuRef: MessageTypeDefinition<_tarcil_v1_RuRef, _tarcil_v1_RuRef__Output>
      SampleAttempt: MessageTypeDefinition<_tarcil_v1_SampleAttempt, _tarcil_v1_SampleAttempt__Output>
      Scheduler: SubtypeConstructor<typeof grpc.Client, _tarcil_v1_SchedulerClient> & { service: _tarcil_v1_SchedulerDefinition }
      Server: MessageTypeDefinition<_tarcil_v1_Server, _tarcil_v1_Server__Output>
      StageTimes: MessageTypeDefinition<_tarcil_v1_StageTimes, _tarcil_v1_StageTimes__Output>
      SubmitJobRequest: MessageTypeDefinition<_tarcil_v1_SubmitJobRequest, _tarcil_v1_SubmitJobRequest__Output>
      SubmitJobResponse: MessageTypeDefinition<_tarcil_v1_SubmitJobResponse, _tarcil_v1_SubmitJobResponse__Output>
      Task: MessageTypeDefinition<_tarcil_v1_Task, _tarcil_v1_Task__Output>
      WatchJobRequest: MessageTypeDefinition<_tarcil_v1_WatchJobRequest, _tarcil_v1_WatchJobRequest__Output>
    }
  }
}

