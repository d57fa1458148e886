/**
 * The dashboard's server side, without a browser: a 10,000-server cell goes out as rack summaries
 * and then only the racks that changed, at most one update per tick whatever the rate of change,
 * and nothing ticks without a browser; the protection off loopback (refused without TLS or a
 * token; the token asked for, by header, query or cookie; HTTPS with the front-end's certificate).
 */
import { spawn } from 'node:child_process';
import { request } from 'node:https';
import { fileURLToPath } from 'node:url';
import { readFileSync } from 'node:fs';
import { afterAll, describe, expect, it } from 'vitest';
import type { JobManager } from '../../src/owner/manager.ts';
import { Dashboard, dashboardRefusal, TICK_MS } from '../../src/frontend/dashboard/server.ts';
import { CellView } from '../../src/frontend/dashboard/cell-view.ts';
import { Metrics } from '../../src/frontend/metrics.ts';
import { startScheduler } from '../../src/frontend/runtime.ts';
import { loadCatalog } from '../../src/model/catalog.ts';
import { ServerState } from '../../src/sampling/ru-index.ts';
import { Keys } from '../../src/state/keys.ts';
import { MemoryStore } from '../../src/store/memory.ts';
import { SystemClock } from '../../src/util/clock.ts';
import { createLogger } from '../../src/util/log.ts';
import { SeededRng } from '../../src/util/rng.ts';
import { makePki } from '../support/tls.ts';

const RACK = 40;

/** A manager whose shared view holds `n` servers of 16 RUs, RACK to a rack, over two platforms. */
function bigCell(n: number): { manager: JobManager; servers: ServerState[] } {
  const servers: ServerState[] = [];
  const map = new Map<string, ServerState>();
  for (let i = 0; i < n; i++) {
    const s = new ServerState(
      { id: `s${i}`, platform: i % 2 === 0 ? 'r3-2xlarge' : 'c3-large', rack: `r${Math.floor(i / RACK)}`, rus: 16, speed: 1, attributes: {} },
      i * 16,
    );
    if (i % 3 === 0) s.occupants[0] = { job: 'j', task: i, caused: [], priority: 0, state: 'busy' };
    servers.push(s);
    map.set(s.spec.id, s);
  }
  const manager = { view: { state: { servers: map } }, agents: [] } as unknown as JobManager;
  return { manager, servers };
}

interface Sse {
  events: { name: string; data: unknown }[];
  close(): void;
}

async function subscribe(url: string): Promise<Sse> {
  const ctl = new AbortController();
  const res = await fetch(url, { signal: ctl.signal });
  expect(res.status).toBe(200);
  const events: Sse['events'] = [];
  const reader = res.body!.getReader();
  const dec = new TextDecoder();
  let buf = '';
  void (async () => {
    for (;;) {
      const r: { done: boolean; value?: Uint8Array } = await reader.read().catch(() => ({ done: true }));
      if (r.done || !r.value) return;
      buf += dec.decode(r.value, { stream: true });
      let end;
      while ((end = buf.indexOf('\n\n')) >= 0) {
        const block = buf.slice(0, end);
        buf = buf.slice(end + 2);
        const name = /^event: (.*)$/m.exec(block)?.[1];
        const data = /^data: (.*)$/m.exec(block)?.[1];
        if (name && data) events.push({ name, data: JSON.parse(data) });
      }
    }
  })();
  return { events, close: () => ctl.abort() };
}

const until = async (ok: () => boolean, ms = 5000): Promise<void> => {
  const t0 = Date.now();
  while (!ok()) {
    if (Date.now() - t0 > ms) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 20));
  }
};

describe('the dashboard on a 10,000-server cell', () => {
  const { manager, servers } = bigCell(10_000);
  const store = new MemoryStore();
  const dash = new Dashboard({
    manager,
    store,
    keys: new Keys('/dash-big/'),
    metrics: new Metrics(),
    log: createLogger('test'),
    job: () => Promise.resolve({}),
    explain: () => Promise.resolve({}),
  });
  let port = 0;
  afterAll(async () => {
    await dash.close();
    await store.close();
  });

  it('summarises the cell by rack', () => {
    const view = new CellView(manager);
    const { racks, totals } = view.racks();
    expect(racks.length).toBe(2 * (10_000 / RACK));
    expect(totals.servers).toBe(10_000);
    expect(totals.rus).toBe(160_000);
    expect(totals.busy).toBe(Math.ceil(10_000 / 3));
    expect(totals.free).toBe(160_000 - totals.busy);
    // Nothing changed: the same summaries, not rebuilt; a server's occupancy changes: rebuilt.
    const same = view.racks();
    expect(view.racks()).toBe(same);
    servers[0]!.version++;
    expect(view.racks()).not.toBe(same);
    expect(view.rack('r3-2xlarge/r0').map((s) => s.rus.length)).toEqual(new Array(RACK / 2).fill(16));
  });

  it('sends a snapshot, then only the racks that changed, at most one update a tick, and stops ticking without a browser', async () => {
    port = await dash.listen({ host: '127.0.0.1', port: 0 });
    expect(dash.connected).toBe(0);
    const sse = await subscribe(`http://127.0.0.1:${port}/events`);
    await until(() => sse.events.some((e) => e.name === 'snapshot'));
    const snap = sse.events[0]!.data as { racks: unknown[]; totals: { servers: number } };
    expect(snap.racks.length).toBe(500);
    expect(snap.totals.servers).toBe(10_000);
    // The snapshot is small: a rack summary each, not 160,000 RUs.
    expect(JSON.stringify(snap).length).toBeLessThan(100_000);
    expect(dash.connected).toBe(1);

    // One server changes, many times over a second: one rack is sent, a few times at most.
    const s = servers[5]!;
    const t0 = Date.now();
    let n = 0;
    while (Date.now() - t0 < 1000) {
      s.occupants[1 + (n % 15)] = n % 2 === 0 ? { job: 'k', task: n, caused: [], priority: 0, state: 'reserved' } : null;
      s.version++;
      n++;
      await new Promise((r) => setTimeout(r, 5));
    }
    await new Promise((r) => setTimeout(r, 2 * TICK_MS));
    const cells = sse.events.filter((e) => e.name === 'cell').map((e) => e.data as { racks: { key: string }[] });
    expect(n).toBeGreaterThan(50);
    expect(cells.length).toBeGreaterThan(0);
    expect(cells.length).toBeLessThanOrEqual(Math.ceil(1000 / TICK_MS) + 2);
    for (const c of cells) expect(c.racks.map((r) => r.key)).toEqual([`${s.spec.platform}/${s.spec.rack}`]);

    sse.close();
    await until(() => dash.connected === 0);
  });
});

describe('tarcil up', () => {
  it('serves the dashboard on --http-port and prints its address in the banner', async () => {
    const bin = fileURLToPath(new URL('../../src/cli/bin.js', import.meta.url));
    const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('VITEST')));
    const child = spawn(process.execPath, [bin, 'up', '--port', '0', '--metrics-port', '0', '--http-port', '0'], {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...env, TARCIL_LOG: 'silent' },
    });
    try {
      let out = '';
      child.stdout.on('data', (d: Buffer) => (out += d.toString()));
      await until(() => /dashboard +http:\/\/127\.0\.0\.1:\d+\//.test(out), 60_000);
      const url = /dashboard +(http:\/\/127\.0\.0\.1:\d+\/)/.exec(out)![1]!;
      const page = await fetch(url);
      expect(page.status).toBe(200);
      expect(await page.text()).toContain('<script type="module" src="app.js">');
      const app = await fetch(`${url}app.js`);
      expect(app.status).toBe(200);
      expect(app.headers.get('content-type')).toContain('javascript');
      expect((await fetch(`${url}app.css`)).status).toBe(200);
    } finally {
      child.kill('SIGTERM');
      await new Promise((r) => child.once('exit', r));
    }
  });
});

describe('the dashboard off loopback', () => {
  const log = createLogger('test');
  const opened: { close(): Promise<void> }[] = [];
  afterAll(async () => {
    for (const c of opened) await c.close();
  });

  async function frontEnd(o: { host: string; token?: string; tls?: { certFile: string; keyFile: string }; httpPort?: number }) {
    const store = new MemoryStore();
    const sched = await startScheduler({
      name: 'dash-auth',
      store,
      keys: new Keys('/dash-auth/'),
      catalog: loadCatalog(),
      clock: new SystemClock(),
      rng: new SeededRng(1),
      log,
      agents: 1,
      host: o.host,
      port: 0,
      httpPort: o.httpPort ?? 0,
      ...(o.token ? { httpToken: o.token } : {}),
      ...(o.tls ? { tls: o.tls } : {}),
    }).catch(async (err: unknown) => {
      await store.close();
      throw err;
    });
    opened.push({ close: async () => (await sched.close(), await store.close()) });
    return sched;
  }

  it('a dashboard port already taken stops the front-end with a message naming --http-port', async () => {
    const first = await frontEnd({ host: '127.0.0.1' });
    const err = await frontEnd({ host: '127.0.0.1', httpPort: first.httpPort }).catch((e: unknown) => e);
    expect(String(err)).toMatch(/dashboard's port: .*EADDRINUSE.*--http-port, 0 for any free port/);
  });

  it('is not served on another address without TLS or a token, and says why', async () => {
    expect(dashboardRefusal({ host: '127.0.0.1', port: 0 })).toBeUndefined();
    expect(dashboardRefusal({ host: '0.0.0.0', port: 0, token: 't' })).toBeUndefined();
    const sched = await frontEnd({ host: '0.0.0.0' });
    expect(sched.httpPort).toBeUndefined();
    expect(sched.httpRefused).toContain('needs TLS (--tls-cert/--tls-key) or a token (--http-token)');
  });

  it('asks for its token: by header, by ?token= once (then a cookie), and refuses a wrong one', async () => {
    const sched = await frontEnd({ host: '0.0.0.0', token: 'open-sesame' });
    const base = `http://127.0.0.1:${sched.httpPort}`;
    expect((await fetch(`${base}/`)).status).toBe(401);
    expect((await fetch(`${base}/events`)).status).toBe(401);
    expect((await fetch(`${base}/`, { headers: { authorization: 'Bearer wrong' } })).status).toBe(401);
    expect((await fetch(`${base}/api/rack?key=x`, { headers: { authorization: 'Bearer open-sesame' } })).status).toBe(200);
    const first = await fetch(`${base}/?token=open-sesame`);
    expect(first.status).toBe(200);
    const cookie = (first.headers.get('set-cookie') ?? '').split(';')[0]!;
    expect(cookie).toMatch(/^tarcil_dashboard=/);
    expect(first.headers.get('set-cookie')).toContain('HttpOnly');
    expect((await fetch(`${base}/api/rack?key=x`, { headers: { cookie } })).status).toBe(200);
  });

  it("is served over HTTPS with the front-end's certificate", async () => {
    const pki = makePki();
    const sched = await frontEnd({ host: '127.0.0.1', tls: { certFile: pki.serverCert, keyFile: pki.serverKey } });
    expect(sched.httpScheme).toBe('https');
    const body = await new Promise<string>((resolve, reject) => {
      const req = request({ host: '127.0.0.1', port: sched.httpPort, path: '/api/rack?key=none', ca: readFileSync(pki.ca), servername: 'localhost' }, (res) => {
        let b = '';
        res.on('data', (d: Buffer) => (b += d.toString()));
        res.on('end', () => resolve(`${res.statusCode} ${b}`));
      });
      req.on('error', reject);
      req.end();
    });
    expect(body).toBe('200 []');
  });
});
