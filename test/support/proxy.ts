import { connect, createServer, type Socket } from 'node:net';

/**
 * A TCP proxy in front of a server that can cut the network without closing anything: while
 * partitioned, bytes in both directions are held back (as TCP would keep retransmitting them)
 * and delivered on heal, so clients see silence, not a reset; the server keeps running.
 */
export interface TcpProxy {
  port: number;
  partition(): void;
  heal(): void;
  close(): Promise<void>;
}

export async function tcpProxy(targetPort: number, targetHost = '127.0.0.1'): Promise<TcpProxy> {
  let cut = false;
  const held: (() => void)[] = [];
  const sockets = new Set<Socket>();
  const forward = (from: Socket, to: Socket): void => {
    from.on('data', (chunk: Buffer) => {
      if (cut) held.push(() => to.write(chunk));
      else to.write(chunk);
    });
    from.on('end', () => (cut ? held.push(() => to.end()) : to.end()));
    from.on('error', () => to.destroy());
    from.on('close', () => sockets.delete(from));
  };
  const server = createServer((client) => {
    const upstream = connect(targetPort, targetHost);
    sockets.add(client);
    sockets.add(upstream);
    forward(client, upstream);
    forward(upstream, client);
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
    partition: () => {
      cut = true;
    },
    heal: () => {
      cut = false;
      for (const f of held.splice(0)) f();
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}
