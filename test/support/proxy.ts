import { connect, createServer, type Socket } from 'node:net';

/**
 * A TCP proxy in front of a server that can cut the network without closing anything: while
 * partitioned, bytes in both directions are held back (as TCP would keep retransmitting them)
 * and delivered on heal, so clients see silence, not a reset; the server keeps running.
 * It can also delay traffic: with delay(ms) every chunk is delivered ms later, in order (a slow
 * link rather than a cut one).
 */
export interface TcpProxy {
  port: number;
  /** Holds back bytes both ways, or only those to the server (its answers still reach the client). */
  partition(only?: 'to-server'): void;
  heal(): void;
  /** Delays every chunk, both ways, by ms from now on (0: no delay); order is kept. */
  delay(ms: number): void;
  close(): Promise<void>;
}

export async function tcpProxy(targetPort: number, targetHost = '127.0.0.1'): Promise<TcpProxy> {
  let cut = false;
  let cutToServer = false;
  let delayMs = 0;
  const held: (() => void)[] = [];
  const sockets = new Set<Socket>();
  const timers = new Set<NodeJS.Timeout>();
  /** One ordered, delayed queue per direction of a connection. */
  const sender = (): ((fn: () => void) => void) => {
    const q: { due: number; fn: () => void }[] = [];
    let timer: NodeJS.Timeout | undefined;
    const pump = (): void => {
      if (timer) timers.delete(timer);
      timer = undefined;
      const now = Date.now();
      while (q.length > 0 && (q[0]?.due ?? 0) <= now) q.shift()?.fn();
      const head = q[0];
      if (head) {
        timer = setTimeout(pump, head.due - now);
        timers.add(timer);
      }
    };
    return (fn) => {
      if (delayMs === 0 && q.length === 0) return fn();
      q.push({ due: Date.now() + delayMs, fn });
      if (!timer) {
        timer = setTimeout(pump, Math.max(0, (q[0]?.due ?? 0) - Date.now()));
        timers.add(timer);
      }
    };
  };
  const forward = (from: Socket, to: Socket, toServer: boolean): void => {
    const send = sender();
    const pass = (fn: () => void): void => {
      if (cut || (toServer && cutToServer)) held.push(() => send(fn));
      else send(fn);
    };
    from.on('data', (chunk: Buffer) => pass(() => to.write(chunk)));
    from.on('end', () => pass(() => to.end()));
    from.on('error', () => to.destroy());
    from.on('close', () => sockets.delete(from));
  };
  const server = createServer((client) => {
    const upstream = connect(targetPort, targetHost);
    sockets.add(client);
    sockets.add(upstream);
    forward(client, upstream, true);
    forward(upstream, client, false);
  });
  const port = await new Promise<number>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const a = server.address();
      resolve(typeof a === 'object' && a ? a.port : 0);
    });
  });
  return {
    port,
    partition: (only) => {
      if (only === 'to-server') cutToServer = true;
      else cut = true;
    },
    heal: () => {
      cut = false;
      cutToServer = false;
      for (const f of held.splice(0)) f();
    },
    delay: (ms: number) => {
      delayMs = Math.max(0, ms);
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const t of timers) clearTimeout(t);
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}
