/**
 * The live dashboard of a front-end (`--http-port`): a read-only web page, bundled at build time
 * (web/dashboard, scripts/build-dashboard.mjs → dist/dashboard), fed by server-sent events.
 *
 * One fan-out for every browser: a tick every TICK_MS, running only while a browser is
 * connected, takes what changed since the last one (racks of the cell whose counts moved, job
 * records the store's watch delivered, the admission buckets, the last throughput point) and
 * writes it once, serialized once, to every stream. With no browser nothing runs but the 1 Hz
 * throughput sample (five in-memory counters) and one map write per committed placement (its Q,
 * for the heat map's colours). Read on demand: a rack's RUs (`/api/rack`), a job with its
 * explanation (`/api/job`), the nodes with their tasks (`/api/nodes`, nodes.ts) and a task's logs
 * (`/api/logs`, the TaskLogs handler relayed, task-logs.ts).
 *
 * Protection: on a loopback address anyone on the machine may read it, as /metrics. Elsewhere it
 * is served over HTTPS with the front-end's TLS certificate when it has one, and asks for the
 * bearer token when one is set (`Authorization: Bearer …`, or `?token=…` once, kept in a cookie);
 * with neither it is not started (see dashboardRefusal).
 */
import { createServer as createHttpServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { timingSafeEqual } from 'node:crypto';
import type { JobManager } from '../../owner/manager.ts';
import type { Keys } from '../../state/keys.ts';
import type { ClusterStore } from '../../store/types.ts';
import { errorMessage, isTarcilError } from '../../util/errors.ts';
import type { Logger } from '../../util/log.ts';
import type { Metrics } from '../metrics.ts';
import { CellView, type RackSummary } from './cell-view.ts';
import { admissionBuckets, JobsFeed, ThroughputSampler } from './feeds.ts';
import { nodesView } from './nodes.ts';
import { logsRequest, serveTaskLogs, type TaskLogsHandler } from './task-logs.ts';

/** How often the fan-out sends what changed: at most this many updates a second per browser is 1000 / TICK_MS. */
export const TICK_MS = 400;
/** The admission buckets are sent at most this often. */
const ADMISSION_MS = 2000;
/** Bytes a browser may leave unread before its stream is closed. */
const MAX_BUFFERED = 8 << 20;
/** Jobs sent with the first snapshot. */
const SNAPSHOT_JOBS = 500;

export interface DashboardSource {
  manager: JobManager;
  store: ClusterStore;
  keys: Keys;
  metrics: Metrics;
  log: Logger;
  /** A job with its tasks (as GetJob answers) and its decision record (as ExplainJob answers). */
  job(id: string): Promise<unknown>;
  explain(id: string): Promise<unknown>;
  /** The Scheduler's TaskLogs handler (the logs view relays it); without it the view says so. */
  taskLogs?: TaskLogsHandler;
}

export interface DashboardOptions {
  host: string;
  port: number;
  tls?: { certFile: string; keyFile: string };
  /** Required from browsers when set (Bearer header, ?token= or the cookie it leaves). */
  token?: string;
}

export function isLoopback(host: string): boolean {
  return host === 'localhost' || host === '::1' || /^127\./.test(host);
}

/** Why the dashboard may not be served where it is asked to be (undefined: it may). */
export function dashboardRefusal(o: DashboardOptions): string | undefined {
  if (isLoopback(o.host) || o.tls || o.token) return undefined;
  return `the dashboard is not served on ${o.host}: off loopback it needs TLS (--tls-cert/--tls-key) or a token (--http-token)`;
}

/** Where the bundle is: dist/dashboard of the package, from the sources or from dist/src. */
export function bundleDir(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (let i = 0; i < 6; i++) {
    if (existsSync(join(dir, 'package.json'))) return join(dir, 'dist', 'dashboard');
    dir = dirname(dir);
  }
  return join(process.cwd(), 'dist', 'dashboard');
}

const TYPES: Record<string, string> = { '.html': 'text/html; charset=utf-8', '.js': 'text/javascript; charset=utf-8', '.css': 'text/css; charset=utf-8' };

export class Dashboard {
  readonly cell: CellView;
  readonly jobs: JobsFeed;
  readonly throughput: ThroughputSampler;
  private readonly clients = new Set<ServerResponse>();
  private server: Server | undefined;
  private timer: NodeJS.Timeout | undefined;
  private lastRacks = new Map<string, string>();
  private lastTotals = '';
  private lastCell: ReturnType<CellView['racks']> | undefined;
  private lastAdmission = '';
  private admissionAt = 0;
  private pendingPoints: unknown[] = [];
  private readonly files = new Map<string, Buffer>();
  /** When this front-end started watching the cell (the admission history begins about then). */
  private readonly startedAt = Date.now();

  constructor(private readonly src: DashboardSource) {
    this.cell = new CellView(src.manager);
    this.jobs = new JobsFeed(src.store, src.keys, (err) => src.log.warn({ err: errorMessage(err) }, 'dashboard: the jobs watch ended; listing again'));
    this.throughput = new ThroughputSampler(src.metrics);
  }

  /** Browsers connected now. */
  get connected(): number {
    return this.clients.size;
  }

  async listen(o: DashboardOptions): Promise<number> {
    const handler = (req: IncomingMessage, res: ServerResponse): void => {
      this.handle(req, res, o).catch((err: unknown) => {
        if (!res.headersSent) res.writeHead(isTarcilError(err) && err.code === 'NOT_FOUND' ? 404 : 500, { 'content-type': 'text/plain' });
        res.end(`${errorMessage(err)}\n`);
      });
    };
    const server = o.tls ? createHttpsServer({ cert: readFileSync(o.tls.certFile), key: readFileSync(o.tls.keyFile) }, handler) : createHttpServer(handler);
    this.server = server;
    this.throughput.start((p) => {
      if (this.clients.size > 0) this.pendingPoints.push(p);
    });
    return new Promise((resolve, reject) => {
      server.once('error', (err: NodeJS.ErrnoException) => {
        // Name the flag: the default port (7080) may be taken by another program or another tarcil up.
        if (err.code === 'EADDRINUSE') err.message = `the dashboard's port: ${err.message} (choose another with --http-port, 0 for any free port)`;
        reject(err);
      });
      server.listen(o.port, o.host, () => {
        const a = server.address();
        resolve(typeof a === 'object' && a ? a.port : o.port);
      });
    });
  }

  async close(): Promise<void> {
    this.throughput.stop();
    this.stopTicking();
    for (const c of this.clients) c.end();
    this.clients.clear();
    const s = this.server;
    this.server = undefined;
    if (s) await new Promise<void>((resolve) => s.close(() => resolve()));
  }

  private authorized(req: IncomingMessage, url: URL, res: ServerResponse, token: string | undefined): boolean {
    if (!token) return true;
    const same = (x: string | undefined | null): boolean => {
      if (!x) return false;
      const a = Buffer.from(x);
      const b = Buffer.from(token);
      return a.length === b.length && timingSafeEqual(a, b);
    };
    const auth = req.headers.authorization;
    if (auth?.startsWith('Bearer ') && same(auth.slice(7))) return true;
    const cookie = /(?:^|;\s*)tarcil_dashboard=([^;]+)/.exec(req.headers.cookie ?? '')?.[1];
    if (same(cookie ? decodeURIComponent(cookie) : undefined)) return true;
    if (same(url.searchParams.get('token'))) {
      res.setHeader('set-cookie', `tarcil_dashboard=${encodeURIComponent(token)}; HttpOnly; SameSite=Strict; Path=/`);
      return true;
    }
    res
      .writeHead(401, { 'content-type': 'text/plain', 'www-authenticate': 'Bearer' })
      .end('the dashboard needs its token: Authorization: Bearer <token>, or open /?token=<token>\n');
    return false;
  }

  private async handle(req: IncomingMessage, res: ServerResponse, o: DashboardOptions): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://dashboard');
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.writeHead(405, { allow: 'GET' }).end();
      return;
    }
    if (!this.authorized(req, url, res, o.token)) return;
    const path = url.pathname;
    if (path === '/' || path === '/index.html') return this.file(res, 'index.html');
    if (path === '/app.js' || path === '/app.css') return this.file(res, path.slice(1));
    if (path === '/events') return this.stream(req, res);
    if (path === '/api/rack') return json(res, this.cell.rack(url.searchParams.get('key') ?? ''));
    if (path === '/api/job') {
      const id = url.searchParams.get('id') ?? '';
      const [job, explanation] = await Promise.all([this.src.job(id), this.src.explain(id).catch((err: unknown) => ({ error: errorMessage(err) }))]);
      return json(res, { job, explanation });
    }
    if (path === '/api/nodes') return json(res, await nodesView(this.src.store, this.src.keys, this.src.manager));
    if (path === '/api/logs') {
      let request;
      try {
        request = logsRequest(url.searchParams);
      } catch (err) {
        res.writeHead(400, { 'content-type': 'text/plain' }).end(`${errorMessage(err)}\n`);
        return;
      }
      if (!this.src.taskLogs) {
        res.writeHead(501, { 'content-type': 'text/plain' }).end('this front-end does not relay task logs\n');
        return;
      }
      serveTaskLogs(this.src.taskLogs, res, request);
      return;
    }
    res.writeHead(404, { 'content-type': 'text/plain' }).end('not found: the dashboard is at /\n');
  }

  private file(res: ServerResponse, name: string): void {
    let body = this.files.get(name);
    if (!body) {
      const p = join(bundleDir(), name);
      if (!existsSync(p)) {
        res.writeHead(503, { 'content-type': 'text/plain' }).end(`the dashboard is not built (${p} is missing): run npm run build\n`);
        return;
      }
      body = readFileSync(p);
      this.files.set(name, body);
    }
    const ext = name.slice(name.lastIndexOf('.'));
    res.writeHead(200, { 'content-type': TYPES[ext] ?? 'application/octet-stream', 'cache-control': 'no-cache' }).end(body);
  }

  /** A browser's event stream: a snapshot of everything, then what the ticks find changed. */
  private async stream(req: IncomingMessage, res: ServerResponse): Promise<void> {
    await this.jobs.start();
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive', 'x-accel-buffering': 'no' });
    const cell = this.cell.racks();
    const { racks, totals } = cell;
    // A new browser's snapshot is read now; the others keep their deltas.
    if (this.clients.size === 0) {
      this.lastCell = cell;
      this.lastRacks = new Map(racks.map((r) => [r.key, JSON.stringify(r)]));
      this.lastTotals = JSON.stringify(totals);
      this.jobs.drain();
    }
    const adm = admissionBuckets(this.src.manager, this.startedAt);
    send(
      res,
      'snapshot',
      JSON.stringify({ racks, totals, jobs: this.jobs.newest(SNAPSHOT_JOBS), admission: adm, throughput: this.throughput.points, tickMs: TICK_MS }),
    );
    this.clients.add(res);
    req.on('close', () => {
      this.clients.delete(res);
      if (this.clients.size === 0) this.stopTicking();
    });
    this.timer ??= setInterval(() => this.tick(), TICK_MS);
  }

  private stopTicking(): void {
    clearInterval(this.timer);
    this.timer = undefined;
    this.jobs.close();
    this.pendingPoints = [];
    this.lastAdmission = '';
    this.lastCell = undefined;
  }

  /** The racks whose summary changed since the last one sent, as a `cell` event. */
  private diffCell({ racks, totals }: ReturnType<CellView['racks']>, out: string[]): void {
    const changed: RackSummary[] = [];
    const seen = new Set<string>();
    for (const r of racks) {
      seen.add(r.key);
      const s = JSON.stringify(r);
      if (this.lastRacks.get(r.key) !== s) {
        changed.push(r);
        this.lastRacks.set(r.key, s);
      }
    }
    const removed = [...this.lastRacks.keys()].filter((k) => !seen.has(k));
    for (const k of removed) this.lastRacks.delete(k);
    const t = JSON.stringify(totals);
    if (changed.length > 0 || removed.length > 0 || t !== this.lastTotals) {
      this.lastTotals = t;
      out.push(event('cell', JSON.stringify({ racks: changed, removed, totals })));
    }
  }

  /** Sends what changed since the last tick to every browser, serialized once. */
  tick(): void {
    if (this.clients.size === 0) return;
    const out: string[] = [];
    const cell = this.cell.racks();
    // The same object: nothing in the cell changed since the last tick.
    if (cell !== this.lastCell) this.diffCell(cell, out);
    this.lastCell = cell;

    // The jobs watch ended (compaction, the store away): listed and watched again.
    if (!this.jobs.running) this.jobs.start().catch((err: unknown) => this.src.log.warn({ err: errorMessage(err) }, 'dashboard: the jobs could not be listed'));
    const jobs = this.jobs.drain();
    if (jobs.jobs.length > 0 || jobs.deleted.length > 0) out.push(event('jobs', JSON.stringify(jobs)));
    const now = Date.now();
    if (now - this.admissionAt >= ADMISSION_MS) {
      this.admissionAt = now;
      const a = JSON.stringify(admissionBuckets(this.src.manager, this.startedAt));
      if (a !== this.lastAdmission) {
        this.lastAdmission = a;
        out.push(event('admission', a));
      }
    }
    if (this.pendingPoints.length > 0) {
      out.push(event('throughput', JSON.stringify(this.pendingPoints)));
      this.pendingPoints = [];
    }
    // A comment now and then keeps proxies from closing an idle stream.
    if (out.length === 0 && now % 15_000 < TICK_MS) out.push(': keep-alive\n\n');
    if (out.length === 0) return;
    const chunk = out.join('');
    for (const c of this.clients) {
      // A browser that does not read its stream is let go rather than buffered without end.
      if (c.writableLength > MAX_BUFFERED) c.destroy();
      else c.write(chunk);
    }
  }
}

function event(name: string, data: string): string {
  return `event: ${name}\ndata: ${data}\n\n`;
}

function send(res: ServerResponse, name: string, data: string): void {
  res.write(event(name, data));
}

function json(res: ServerResponse, body: unknown): void {
  res.writeHead(200, { 'content-type': 'application/json', 'cache-control': 'no-store' }).end(JSON.stringify(body));
}
