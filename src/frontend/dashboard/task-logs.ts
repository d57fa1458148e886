/**
 * A task's logs in the dashboard (`/api/logs?job=<id>&task=<n>[&follow=1]`): the Scheduler's own
 * TaskLogs handler (node-service.ts: where the task's latest attempt ran, the node's
 * NodeMonitor.ReadTaskLog relayed with its flow control and its errors) run against this HTTP
 * response instead of a gRPC stream. The browser reads newline-delimited JSON: one line
 * `{"stream":"stdout"|"stderr","text":…,"path"?:…}` per chunk, then `{"end":true}` or
 * `{"error":…,"code":…}`.
 */
import { EventEmitter } from 'node:events';
import type { ServerResponse } from 'node:http';
import { StringDecoder } from 'node:string_decoder';
import type * as grpc from '@grpc/grpc-js';
import { invalid } from '../../util/errors.ts';
import type { TaskLogChunk } from '../../rpc/gen/tarcil/v1/TaskLogChunk.ts';
import type { TaskLogsRequest__Output } from '../../rpc/gen/tarcil/v1/TaskLogsRequest.ts';

export type TaskLogsHandler = (call: grpc.ServerWritableStream<TaskLogsRequest__Output, TaskLogChunk>) => void;

/** gRPC status codes by number, for the browser's message. */
const CODE_NAMES: Record<number, string> = {
  3: 'INVALID_ARGUMENT',
  4: 'DEADLINE_EXCEEDED',
  5: 'NOT_FOUND',
  7: 'PERMISSION_DENIED',
  8: 'RESOURCE_EXHAUSTED',
  9: 'FAILED_PRECONDITION',
  13: 'INTERNAL',
  14: 'UNAVAILABLE',
};

/** The request of `/api/logs` from its query, each field checked. */
export function logsRequest(q: URLSearchParams): TaskLogsRequest__Output {
  const jobId = q.get('job') ?? '';
  if (jobId === '') throw invalid('job', 'is required (a job id)');
  const raw = q.get('task') ?? '';
  if (!/^\d{1,9}$/.test(raw)) throw invalid('task', 'must be a task index: a whole number from 0');
  const follow = q.get('follow') ?? '0';
  if (follow !== '0' && follow !== '1') throw invalid('follow', 'must be 0 or 1');
  return { jobId, task: Number(raw), follow: follow === '1', namespace: '' };
}

/**
 * The part of a server stream the TaskLogs handler uses (request, write with its back-pressure,
 * end, the `error` that carries a status, cancellation), over an HTTP response.
 */
class HttpLogCall extends EventEmitter {
  cancelled = false;
  private readonly decoders = new Map<string, StringDecoder>();
  private done = false;

  constructor(
    readonly request: TaskLogsRequest__Output,
    private readonly res: ServerResponse,
  ) {
    super();
    res.on('drain', () => this.emit('drain'));
    // How the handler ends the stream with a status (endStreamWithError, or a node's error relayed).
    this.on('error', (e: Error & { code?: number; details?: string }) => {
      const code = typeof e.code === 'number' ? (CODE_NAMES[e.code] ?? String(e.code)) : 'INTERNAL';
      this.finish({ error: e.details ?? e.message, code });
    });
  }

  write(c: TaskLogChunk): boolean {
    if (this.done) return true;
    const stream = c.stream === 'stderr' ? 'stderr' : 'stdout';
    let d = this.decoders.get(stream);
    if (!d) this.decoders.set(stream, (d = new StringDecoder('utf8')));
    const data = c.data === undefined ? Buffer.alloc(0) : Buffer.isBuffer(c.data) ? c.data : Buffer.from(c.data as Uint8Array);
    return this.res.write(`${JSON.stringify({ stream, text: d.write(data), ...(c.path ? { path: c.path } : {}) })}\n`);
  }

  end(): void {
    this.finish({ end: true });
  }

  /** The browser went away before the end: the handler cancels the node's stream. */
  cancel(): void {
    if (this.done) return;
    this.cancelled = true;
    this.done = true;
    this.emit('cancelled');
  }

  private finish(last: object): void {
    if (this.done) return;
    this.done = true;
    this.res.end(`${JSON.stringify(last)}\n`);
  }
}

/** Serves one `/api/logs` request through the TaskLogs handler. */
export function serveTaskLogs(handler: TaskLogsHandler, res: ServerResponse, request: TaskLogsRequest__Output): void {
  res.writeHead(200, { 'content-type': 'application/x-ndjson; charset=utf-8', 'cache-control': 'no-store', 'x-accel-buffering': 'no' });
  const call = new HttpLogCall(request, res);
  // The browser left (another page, the view closed): the node's stream is cancelled.
  res.on('close', () => call.cancel());
  handler(call as unknown as grpc.ServerWritableStream<TaskLogsRequest__Output, TaskLogChunk>);
}
