import type { SchedulerClient } from '../../src/frontend/gen/tarcil/v1/Scheduler.ts';
import type { Job__Output } from '../../src/frontend/gen/tarcil/v1/Job.ts';

/** Promise wrappers over the generated Scheduler client, for tests. */
export function submit(c: SchedulerClient, req: Parameters<SchedulerClient['SubmitJob']>[0], deadlineMs = 10_000): Promise<{ jobId: string }> {
  return new Promise((resolve, reject) => {
    c.SubmitJob(req, { deadline: new Date(Date.now() + deadlineMs) }, (err, res) => (err || !res ? reject(err ?? new Error('empty')) : resolve(res)));
  });
}

export function getJob(c: SchedulerClient, jobId: string): Promise<Job__Output> {
  return new Promise((resolve, reject) => {
    c.GetJob({ jobId }, { deadline: new Date(Date.now() + 10_000) }, (err, res) => (err || !res ? reject(err ?? new Error('empty')) : resolve(res)));
  });
}

export async function waitFinal(c: SchedulerClient, jobId: string, timeoutMs = 30_000): Promise<Job__Output> {
  const t0 = Date.now();
  for (;;) {
    const j = await getJob(c, jobId);
    if (j.state === 'succeeded' || j.state === 'failed' || j.state === 'cancelled') return j;
    if (Date.now() - t0 > timeoutMs) throw new Error(`job ${jobId} not final after ${timeoutMs} ms: ${JSON.stringify(j)}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}
