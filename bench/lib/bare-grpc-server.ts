/**
 * A gRPC server with nothing of tarcil in it, for benchmarks that want to tell grpc-js's own cost
 * from tarcil's: `/tarcil.v1.Scheduler/WatchJob` answers every call with one JobEvent made up
 * once (a running job of BARE_TASKS tasks, default 20) and keeps the stream open;
 * `/grpc.health.v1.Health/Check` answers at once. It serves /metrics as prom-client names what it measures (the event-loop delay
 * since the last scrape, the V8 heap), and prints `port <grpc> metrics <http>` once listening.
 *
 * Run: node --import tsx bench/lib/bare-grpc-server.ts
 */
import * as grpc from '@grpc/grpc-js';
import { createServer } from 'node:http';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { getHeapStatistics } from 'node:v8';
import { protoRoot } from '../../src/rpc/proto-root.ts';

const raw = {
  requestSerialize: (b: Buffer) => b,
  requestDeserialize: (b: Buffer) => b,
  responseSerialize: (b: Buffer) => b,
  responseDeserialize: (b: Buffer) => b,
};
const tasks = Number(process.env.BARE_TASKS ?? 20);
const type = protoRoot().lookupType('tarcil.v1.JobEvent');
const job = { id: 'bare', name: 'watched', state: 'running', profile: 'spark-lr', tasks, taskStates: { running: tasks } };
const event = Buffer.from(
  type
    .encode(
      type.fromObject({
        job,
        revision: 1,
        tasks: Array.from({ length: tasks }, (_, index) => ({
          index,
          state: 'running',
          ru: { server: `server-${index}`, index: 0 },
          attempt: 0,
          placedAtMs: Date.now(),
          startedAtMs: Date.now(),
        })),
      }),
    )
    .finish(),
);
const server = new grpc.Server();
server.addService(
  { WatchJob: { path: '/tarcil.v1.Scheduler/WatchJob', requestStream: false, responseStream: true, ...raw } },
  {
    WatchJob: (call: grpc.ServerWritableStream<Buffer, Buffer>) => {
      call.write(event);
    },
  },
);
server.addService(
  { Check: { path: '/grpc.health.v1.Health/Check', requestStream: false, responseStream: false, ...raw } },
  {
    Check: (_call: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => cb(null, Buffer.alloc(0)),
  },
);
const port = await new Promise<number>((resolve, reject) =>
  server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (e, p) => (e ? reject(e) : resolve(p))),
);
const eld = monitorEventLoopDelay({ resolution: 10 });
eld.enable();
const http = createServer((_req, res) => {
  const h = getHeapStatistics();
  res.end(
    `nodejs_eventloop_lag_max_seconds ${eld.max / 1e9}\nnodejs_heap_size_used_bytes ${h.used_heap_size}\nnodejs_heap_size_total_bytes ${h.total_heap_size}\n`,
  );
  eld.reset();
});
await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve));
const address = http.address();
process.stdout.write(`port ${port} metrics ${typeof address === 'object' && address ? address.port : 0}\n`);
process.on('SIGTERM', () => process.exit(0));
