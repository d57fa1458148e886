/**
 * A WatchJob stream opened by a bench that measures how long its first event takes: the time from
 * opening to the first event goes into `first`, and an end other than the bench's own cancel into
 * `ends` (the status's name and the start of its details).
 */
import * as grpc from '@grpc/grpc-js';
import type { SchedulerClient } from '../../src/rpc/gen/tarcil/v1/Scheduler.ts';

export type WatchCall = ReturnType<SchedulerClient['WatchJob']>;

export function openTimedWatch(client: SchedulerClient, jobId: string, first: number[], ends: string[]): WatchCall {
  const call = client.WatchJob({ jobId });
  const openedAt = performance.now();
  let seen = false;
  call.on('data', () => {
    if (seen) return;
    seen = true;
    first.push(performance.now() - openedAt);
  });
  call.on('error', (e: grpc.ServiceError) => {
    if (e.code !== grpc.status.CANCELLED) ends.push(`${grpc.status[e.code] ?? String(e.code)}: ${e.details.slice(0, 120)}`);
  });
  return call;
}
