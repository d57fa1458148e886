/**
 * The gRPC plumbing of every tarcil gRPC server (a front-end's Scheduler, a node's NodeMonitor)
 * and client: servers and credentials (TLS, mutual TLS), health and reflection, call deadlines.
 * Every service added runs through guard.ts; TarcilError codes become gRPC status in status.ts.
 */
import * as grpc from '@grpc/grpc-js';
import type { HealthImplementation } from 'grpc-health-check';
import { readFileSync } from 'node:fs';
import type { Logger } from '../util/log.ts';
import { grpcServerOptions, type ConnectionLimits } from './connection-limits.ts';
import { paceCalls } from './call-pacer.ts';
import { guardServer } from './guard.ts';
import { TarcilError } from '../util/errors.ts';
import { toStatus } from './status.ts';

export { endStreamWithError, errorFromStatus, toStatus } from './status.ts';

export interface TlsFiles {
  certFile: string;
  keyFile: string;
  /** With a CA, clients must present a certificate it signed (mutual TLS). */
  caFile?: string;
}

export interface GrpcServerHandle {
  server: grpc.Server;
  port: number;
  health: HealthImplementation;
  /** Stops accepting calls, lets running ones finish for up to graceMs, then cuts them. */
  close(graceMs?: number): Promise<void>;
}

/** Largest request accepted (a job spec with a long argv list fits many times over). */
export const MAX_REQUEST_BYTES = 1 << 20;

/**
 * A gRPC server with the services given, server reflection (grpcurl, grpcui) and the standard
 * health service (`grpc.health.v1.Health`), bound to host:port (port 0 picks a free one).
 */
export async function startGrpcServer(opts: {
  host: string;
  port: number;
  tls?: TlsFiles;
  register: (server: grpc.Server) => string[];
  /** Where a handler's fault is logged (guard.ts). */
  log?: Logger;
  /** What a connection and a call may hold, and for how long (connection-limits.ts; defaults there). */
  limits?: Partial<ConnectionLimits>;
}): Promise<GrpcServerHandle> {
  // Loaded here, not with the module: a client (the command line) needs none of them (it makes its
  // client classes without proto-loader, proto-root.ts), and reflection alone takes a tenth of a
  // second or more to load.
  const [{ ReflectionService }, { HealthImplementation }, { loadProtos }] = await Promise.all([
    import('@grpc/reflection'),
    import('grpc-health-check'),
    import('./proto.ts'),
  ]);
  const server = guardServer(new grpc.Server(grpcServerOptions(opts.limits, { 'grpc.max_receive_message_length': MAX_REQUEST_BYTES })), opts.log);
  const services = opts.register(server);
  const health = new HealthImplementation({ '': 'SERVING', ...Object.fromEntries(services.map((s) => [s, 'SERVING'])) });
  health.addToServer(server);
  // Advertise only what this server serves (a front-end does not serve NodeMonitor, nor a node Scheduler).
  new ReflectionService(loadProtos().def, { services }).addToServer(server);
  const creds = opts.tls
    ? grpc.ServerCredentials.createSsl(
        opts.tls.caFile ? readFileSync(opts.tls.caFile) : null,
        [{ cert_chain: readFileSync(opts.tls.certFile), private_key: readFileSync(opts.tls.keyFile) }],
        opts.tls.caFile !== undefined,
      )
    : grpc.ServerCredentials.createInsecure();
  const port = await new Promise<number>((resolve, reject) => {
    server.bindAsync(`${opts.host}:${opts.port}`, creds, (err, p) => (err ? reject(err) : resolve(p)));
  });
  // Bound: grpc-js has made its HTTP/2 servers, and no call has come yet.
  paceCalls(server, opts.limits);
  return {
    server,
    port,
    health,
    close: (graceMs = 2000) =>
      new Promise<void>((resolve) => {
        for (const s of services) health.setStatus(s, 'NOT_SERVING');
        health.setStatus('', 'NOT_SERVING');
        const t = setTimeout(() => {
          server.forceShutdown();
          resolve();
        }, graceMs);
        t.unref();
        server.tryShutdown(() => {
          clearTimeout(t);
          resolve();
        });
      }),
  };
}

export function clientCredentials(tls?: { caFile?: string; certFile?: string; keyFile?: string }): grpc.ChannelCredentials {
  if (!tls) return grpc.credentials.createInsecure();
  return grpc.credentials.createSsl(
    tls.caFile ? readFileSync(tls.caFile) : null,
    tls.keyFile ? readFileSync(tls.keyFile) : null,
    tls.certFile ? readFileSync(tls.certFile) : null,
  );
}

/** Milliseconds left before the call's deadline (Infinity without one). */
export function remainingMs(call: { getDeadline(): grpc.Deadline }): number {
  const d = call.getDeadline();
  const at = d instanceof Date ? d.getTime() : d;
  return Number.isFinite(at) ? at - Date.now() : Infinity;
}

export function deadlineExceeded(what: string): TarcilError {
  return new TarcilError('DEADLINE_EXCEEDED', `deadline exceeded before ${what}`);
}

export function unaryStatus(err: unknown): Partial<grpc.StatusObject> {
  return toStatus(err);
}
