/**
 * `tarcil logs`: a task's stdout and stderr, written by the process executor on its node, served
 * by the node's monitor (NodeMonitor.ReadTaskLog) and reached through the front-end (TaskLogs) or
 * directly; `--follow` streams until the attempt ends; the simulated executor says it writes no
 * log. On the embedded store: a front-end and monitors in this process, as `tarcil up` runs them.
 */
import { execFile } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { nodeMonitorClient } from '../../src/cli/grpc-clients.ts';
import type { SchedulerClient } from '../../src/rpc/gen/tarcil/v1/Scheduler.ts';
import type { TaskLogChunk__Output } from '../../src/rpc/gen/tarcil/v1/TaskLogChunk.ts';
import type { SchedulerProcess } from '../../src/frontend/runtime.ts';
import type { MonitorProcess } from '../../src/node/runtime.ts';
import { getJob, submit, waitFinal } from '../support/live.ts';
import { startMixedCell, type MixedCell } from '../support/mixed-cell.ts';

const BIN = join(import.meta.dirname, '..', '..', 'src', 'cli', 'bin.js');

/** Runs `tarcil args` without blocking this process (whose front-end it talks to). */
function tarcil(args: string[]): Promise<{ status: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [BIN, ...args], { encoding: 'utf8', env: { ...process.env, TARCIL_LOG: 'silent' } }, (err, stdout, stderr) => {
      resolve({ status: err ? Number((err as { code?: number }).code ?? 1) : 0, stdout, stderr });
    });
  });
}
let cell: MixedCell;
let proc: MonitorProcess;
let logDir: string;
let sched: SchedulerProcess;
let c: SchedulerClient;

beforeAll(async () => {
  cell = await startMixedCell({ name: 'tl', prefix: '/task-logs/', seed: 2, simRack: 'r0', simRus: 2 });
  ({ proc, sched, logDir, client: c } = cell);
});
afterAll(async () => {
  await cell?.close();
});

interface Read {
  stdout: string;
  stderr: string;
  paths: string[];
  chunks: number;
}

function read(stream: grpc.ClientReadableStream<TaskLogChunk__Output>, onChunk?: (r: Read) => void): Promise<Read> {
  const r: Read = { stdout: '', stderr: '', paths: [], chunks: 0 };
  return new Promise((resolve, reject) => {
    stream.on('data', (ch: TaskLogChunk__Output) => {
      r[ch.stream === 'stderr' ? 'stderr' : 'stdout'] += ch.data.toString();
      if (ch.path) r.paths.push(ch.path);
      r.chunks++;
      onChunk?.(r);
    });
    stream.on('end', () => resolve(r));
    stream.on('error', reject);
  });
}

const onProcessNode = { attributes: { exec: 'process' } };

describe('tarcil logs', () => {
  it("serves a finished task's stdout and stderr through the front-end and from the node directly", async () => {
    const spec = {
      name: 'echo',
      profile: 'spark-lr',
      tasks: 2,
      constraints: onProcessNode,
      command: { argv: ['sh', '-c', 'echo "out of $TARCIL_TASK"; echo "err of $TARCIL_TASK" >&2'] },
    };
    const { jobId } = await submit(c, { specJson: JSON.stringify(spec) });
    expect((await waitFinal(c, jobId)).state).toBe('succeeded');
    const viaFront = await read(c.TaskLogs({ jobId, task: 1, follow: false }));
    expect(viaFront).toMatchObject({ stdout: 'out of 1\n', stderr: 'err of 1\n' });
    expect(viaFront.paths).toHaveLength(2);
    expect(viaFront.paths[0]).toMatch(new RegExp(`^${logDir}/${jobId}/1-\\d+\\.stdout$`));

    const node = nodeMonitorClient(`127.0.0.1:${proc.port}`);
    try {
      const direct = await read(node.ReadTaskLog({ server: '', job: jobId, task: 0, follow: false }));
      expect(direct).toMatchObject({ stdout: 'out of 0\n', stderr: 'err of 0\n' });
    } finally {
      node.close();
    }
  });

  it('--follow streams what a running task writes, and ends when the task ends', async () => {
    // The task writes a line, then waits for the test to create a file before writing the rest:
    // whatever the machine's speed, the first line is read while the task runs.
    const go = join(logDir, 'go');
    const script = 'echo "line 1"; while [ ! -f "$GO" ]; do sleep 0.05; done; echo "line 2"; echo done >&2';
    const { jobId } = await submit(c, {
      specJson: JSON.stringify({
        name: 'follow',
        profile: 'spark-lr',
        tasks: 1,
        constraints: onProcessNode,
        command: { argv: ['sh', '-c', script], env: { GO: go } },
      }),
    });
    for (;;) {
      const j = await getJob(c, jobId);
      if (j.taskStates.running === 1) break;
      await new Promise((r) => setTimeout(r, 20));
    }
    let released = false;
    const got = await read(c.TaskLogs({ jobId, task: 0, follow: true }), (r) => {
      if (!released && r.stdout.includes('line 1')) {
        expect(r.stdout).toBe('line 1\n');
        released = true;
        writeFileSync(go, '');
      }
    });
    expect(released).toBe(true);
    expect(got.stdout).toBe('line 1\nline 2\n');
    expect(got.stderr).toBe('done\n');
    expect((await waitFinal(c, jobId)).state).toBe('succeeded');
  });

  it('says clearly that a task run by the simulated executor has no log, and names bad requests', async () => {
    const { jobId } = await submit(c, {
      specJson: JSON.stringify({ name: 'sim', profile: 'spark-lr', tasks: 1, durationMs: 50, constraints: { attributes: { exec: 'simulated' } } }),
    });
    expect((await waitFinal(c, jobId)).state).toBe('succeeded');
    const err = (await read(c.TaskLogs({ jobId, task: 0, follow: false })).catch((e: unknown) => e)) as grpc.ServiceError;
    expect(err.code).toBe(9); // FAILED_PRECONDITION
    expect(err.details).toBe(`node s0 runs its tasks with the simulated executor, which writes no log: task 0 of ${jobId} has no stdout or stderr to show`);

    const past = (await read(c.TaskLogs({ jobId, task: 5, follow: false })).catch((e: unknown) => e)) as grpc.ServiceError;
    expect(past.code).toBe(3);
    expect(past.details).toMatch(/^task: must be below 1/);
    const none = (await read(c.TaskLogs({ jobId: 'j-nope', task: 0, follow: false })).catch((e: unknown) => e)) as grpc.ServiceError;
    expect(none.code).toBe(5);
  });

  it('the tarcil logs command writes stdout to stdout and stderr to stderr, and exits non-zero with the reason', async () => {
    const { jobId } = await submit(c, {
      specJson: JSON.stringify({
        name: 'cli',
        profile: 'spark-lr',
        tasks: 1,
        constraints: onProcessNode,
        command: { argv: ['sh', '-c', 'echo to-out; echo to-err >&2'] },
      }),
    });
    expect((await waitFinal(c, jobId)).state).toBe('succeeded');
    const ok = await tarcil(['logs', jobId, '--server', `127.0.0.1:${sched.port}`]);
    expect(ok.status).toBe(0);
    expect(ok.stdout).toBe('to-out\n');
    expect(ok.stderr).toBe('to-err\n');
    const direct = await tarcil(['logs', jobId, '0', '--node', `127.0.0.1:${proc.port}`]);
    expect(direct.stdout).toBe('to-out\n');
    const bad = await tarcil(['logs', jobId, 'x1', '--server', `127.0.0.1:${sched.port}`]);
    expect(bad.status).not.toBe(0);
    expect(bad.stderr).toContain("[task]: must be a task index, an integer from 0 to 99999 (got 'x1')");
  }, 60_000);
});
