/**
 * What every process's metrics endpoint shares: a registry with the process's default metrics,
 * served with `/healthz` and `/readyz` (MetricsEndpoint), and the store's request times, requests
 * and watch events (`tarcil_store_request_seconds`, `tarcil_store_requests_by_record_total`,
 * `tarcil_store_watch_events_total`). The scheduler's
 * metrics are in frontend/metrics.ts, the nodes' in node/metrics.ts.
 */
import { createServer, type Server } from 'node:http';
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { Keys } from '../state/keys.ts';
import type { ClusterStore } from '../store/types.ts';
import { errorMessage } from '../util/errors.ts';

/** How long /readyz waits for the store before it calls it unreachable. */
export const READY_STORE_TIMEOUT_MS = 2000;

/** Why the process is not ready; an empty list means ready. */
export type ReadinessCheck = () => Promise<string[]>;

/** Buckets of the store's request times: 0.5 ms to 4 s, doubling (etcd's own disk histograms use the same). */
const STORE_REQUEST_BUCKETS = Array.from({ length: 14 }, (_, i) => 0.0005 * 2 ** i);

/**
 * `tarcil_store_request_seconds`: this process's requests to etcd, each from sending to its
 * answer, by kind (read, write): the store's latency as the scheduler sees it, next to etcd's own
 * handling time (etcd's `grpc_server_handling_seconds` with `--metrics extensive`).
 */
export function registerStoreTimes(registry: Registry, store: ClusterStore | undefined): void {
  if (!store?.onRequestTime) return;
  const h = new Histogram({
    name: 'tarcil_store_request_seconds',
    help: "This process's requests to etcd, from sending to the answer (a wait for a slot under the in-flight limit not counted), by kind: write (transactions, puts, deletes, compactions), read (gets, ranges, read-only transactions)",
    labelNames: ['kind'],
    buckets: STORE_REQUEST_BUCKETS,
    registers: [registry],
  });
  store.onRequestTime((kind, seconds) => h.observe({ kind }, seconds));
}

/**
 * `tarcil_store_watch_events_total`: events etcd delivered to this process's watches, by the kind
 * of record watched (the key segment after the cell's prefix: rus, tasks, jobs, …). Counted from
 * the process's start.
 */
export function registerWatchEvents(registry: Registry, store: ClusterStore | undefined, keys: Keys | undefined): void {
  if (!store?.countWatchEvents || !keys) return;
  const read = store.countWatchEvents((prefix) => (keys.tail(keys.prefix, prefix) ?? '').split('/')[0] || 'other');
  new Counter({
    name: 'tarcil_store_watch_events_total',
    help: "Events etcd delivered to this process's watches, by the kind of record watched (the key segment after the cell's prefix)",
    labelNames: ['kind'],
    registers: [registry],
    collect() {
      this.reset();
      for (const [kind, n] of read()) this.inc({ kind }, n);
    },
  });
}

/**
 * `tarcil_store_requests_by_record_total`: requests this process sent etcd, by kind (read, write) and by
 * the kinds of record each touches (`records`: the key segments after the cell's prefix of every
 * key it compares, reads or writes, sorted and joined by `+`; a placement is `rus+tasks+…`).
 * Counted from registration.
 */
export function registerStoreRequests(registry: Registry, store: ClusterStore | undefined, keys: Keys | undefined): void {
  if (!store?.countRequests || !keys) return;
  const start = keys.prefix.length;
  const read = store.countRequests((key) => {
    const end = key.indexOf('/', start);
    return (key.startsWith(keys.prefix) ? key.slice(start, end < 0 ? undefined : end) : '') || 'other';
  });
  new Counter({
    name: 'tarcil_store_requests_by_record_total',
    help: "Requests this process sent etcd, by kind (read, write) and the kinds of record each touches (the key segments after the cell's prefix, joined by +)",
    labelNames: ['kind', 'records'],
    registers: [registry],
    collect() {
      this.reset();
      for (const [label, n] of read()) {
        const [kind = 'other', records = 'other'] = label.split('|');
        this.inc({ kind, records }, n);
      }
    },
  });
}

/** A Prometheus registry with the process's default metrics, and the HTTP endpoint that serves it with /healthz and /readyz. */
export abstract class MetricsEndpoint {
  readonly registry = new Registry();
  private server: Server | undefined;

  constructor() {
    collectDefaultMetrics({ register: this.registry });
  }

  /** What /readyz checks (see serveRegistry). */
  protected abstract notReady(): Promise<string[]>;

  /** Serves /metrics, /healthz and /readyz on host:port; resolves with the bound port. */
  async listen(host: string, port: number): Promise<number> {
    const { server, port: bound } = await serveRegistry(this.registry, host, port, () => this.notReady());
    this.server = server;
    return bound;
  }

  /** The /readyz verdict, for tests and callers in the same process. */
  readiness(): Promise<string[]> {
    return this.notReady();
  }

  close(): Promise<void> {
    const s = this.server;
    this.server = undefined;
    return closeServer(s);
  }
}

/** The store answers a read within READY_STORE_TIMEOUT_MS: nothing, or why not. */
export async function storeReachable(store: ClusterStore, timeoutMs = READY_STORE_TIMEOUT_MS): Promise<string[]> {
  let timer: NodeJS.Timeout | undefined;
  try {
    await Promise.race([
      store.revision(),
      new Promise((_, reject) => {
        timer = setTimeout(() => reject(new Error(`no answer within ${timeoutMs} ms`)), timeoutMs);
      }),
    ]);
    return [];
  } catch (err) {
    return [`store unreachable: ${errorMessage(err)}`];
  } finally {
    clearTimeout(timer);
  }
}

/** A gauge whose value is read from `read` at each scrape. */
export function readGauge(registry: Registry, name: string, help: string, read: () => number): void {
  new Gauge({
    name,
    help,
    registers: [registry],
    collect() {
      this.set(read());
    },
  });
}

/**
 * The HTTP endpoint: `/metrics` (Prometheus text), `/healthz` (200 while the process answers at
 * all: a liveness probe), `/readyz` (200 when `notReady` finds nothing, else 503 with one reason a
 * line: a readiness probe or a load balancer's health check).
 */
function serveRegistry(registry: Registry, host: string, port: number, notReady: ReadinessCheck): Promise<{ server: Server; port: number }> {
  const server = createServer((req, res) => {
    const path = (req.url ?? '').split('?')[0];
    if (path === '/healthz') {
      res.writeHead(200, { 'content-type': 'text/plain' }).end('ok\n');
      return;
    }
    if (path === '/readyz') {
      notReady().then(
        (why) => res.writeHead(why.length === 0 ? 200 : 503, { 'content-type': 'text/plain' }).end(why.length === 0 ? 'ok\n' : `${why.join('\n')}\n`),
        (err: unknown) => res.writeHead(503, { 'content-type': 'text/plain' }).end(`${errorMessage(err)}\n`),
      );
      return;
    }
    if (path !== '/metrics') {
      res.writeHead(404, { 'content-type': 'text/plain' }).end('see /metrics, /healthz, /readyz\n');
      return;
    }
    registry.metrics().then(
      (text) => res.writeHead(200, { 'content-type': registry.contentType }).end(text),
      (err: unknown) => res.writeHead(500).end(errorMessage(err)),
    );
  });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      const a = server.address();
      resolve({ server, port: typeof a === 'object' && a ? a.port : port });
    });
  });
}

function closeServer(s: Server | undefined): Promise<void> {
  if (!s) return Promise.resolve();
  return new Promise((resolve) => s.close(() => resolve()));
}
