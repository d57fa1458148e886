/**
 * One hop of the pipeline, with nothing else on the machine: a write to etcd and its delivery to
 * processes that watch it. Submit → running is three such hops in a row (the submission, the
 * placement commit, the node's `running` record), so this is the floor the soak's stages stand on.
 *
 *   npx tsx bench/watch-hop.ts [--writes 1500] [--gap-ms 5] [--watchers 1,5] [--ops N] [--endpoint URL] [--name N]
 *
 * With --ops N, each write is a transaction putting N keys (a placement of N/3 tasks writes about
 * N: its RU records, task records and epoch keys); the first key carries the time.
 *
 * With --endpoint, the hops go through an etcd that is already running (a soak's, to see a hop
 * under the cell's load), under their own prefix, and the results are named `--name`.
 *
 * Real etcd on loopback (a private one, temporary data dir). The writer is an EtcdStore, as in
 * every tarcil process; each watcher is a process of its own with an EtcdStore watch on the
 * prefix, as a front-end's or a node's is. The writer puts `writes` keys one after the other,
 * `gap-ms` apart, each value the wall-clock time the put was sent; a watcher notes, for each
 * event, how long after that time it was delivered to its callback (one machine, one clock).
 * Results: bench/results/watch-hop/watch-hop.{md,json}.
 */
import { fork, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { EtcdStore } from '../src/store/etcd.ts';
import { ensureEtcd, startEtcd } from '../test/support/etcd.ts';
import { fmt, machine, mdTable, pct, resultsDir, writeResults } from './lib/report.ts';

const PREFIX = '/watch-hop/';

function flag(name: string, dflt: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 && process.argv[i + 1] !== undefined ? (process.argv[i + 1] as string) : dflt;
}

/** A value of the size of a placement's RU record. */
const FILLER = JSON.stringify({
  state: 'busy',
  job: 'j-0123456789abcdef',
  task: 3,
  agent: 'fe0/agent-2',
  since: 0,
  attempt: 0,
  basedOn: 12345,
  commitId: 'c-0123456789',
  q: 0.93,
  durationMs: 20000,
});

const nowMs = (): number => performance.timeOrigin + performance.now();

interface Quantiles {
  n: number;
  p50: number;
  p99: number;
  max: number;
}

function quantiles(xs: number[]): Quantiles {
  return { n: xs.length, p50: pct(xs, 0.5), p99: pct(xs, 0.99), max: xs.length > 0 ? Math.max(...xs) : NaN };
}

/** A watcher process: delivery delays of the events from `fromRevision` on, sent when asked. */
async function watcher(endpoint: string, fromRevision: number): Promise<void> {
  const store = await EtcdStore.connect({ endpoints: [endpoint] });
  const delays: number[] = [];
  await store.watch({
    prefix: PREFIX,
    fromRevision,
    onEvents: (b) => {
      const at = nowMs();
      for (const e of b.events) if (e.kv.key.startsWith(`${PREFIX}k/`)) delays.push(at - Number(e.kv.value));
    },
    onError: (err) => {
      process.send?.({ error: err.message });
    },
  });
  process.send?.('ready');
  process.on('message', () => {
    process.send?.(quantiles(delays), () => {
      void store.close().finally(() => process.exit(0));
    });
  });
}

async function round(
  store: EtcdStore,
  endpoint: string,
  watchers: number,
  writes: number,
  gapMs: number,
  ops: number,
): Promise<{ watchers: number; put: Quantiles; delivered: Quantiles[] }> {
  await store.put(`${PREFIX}start`, String(nowMs()));
  const from = ((await store.get(`${PREFIX}start`))?.modRevision ?? 0) + 1;
  const kids: ChildProcess[] = Array.from({ length: watchers }, () =>
    fork(fileURLToPath(import.meta.url), ['--watcher', endpoint, String(from)], { execArgv: ['--import', 'tsx'] }),
  );
  await Promise.all(kids.map((k) => new Promise((resolve) => k.once('message', resolve))));
  const puts: number[] = [];
  for (let i = 0; i < writes; i++) {
    const t = performance.now();
    const at = String(nowMs());
    if (ops <= 1) await store.put(`${PREFIX}k/${i % 100}`, at);
    else
      await store.txn({
        compare: [],
        success: Array.from({ length: ops }, (_, k) => ({
          type: 'put' as const,
          key: `${PREFIX}${k === 0 ? 'k' : 'filler'}/${i % 100}/${k}`,
          value: k === 0 ? at : FILLER,
        })),
      });
    puts.push(performance.now() - t);
    await new Promise((resolve) => setTimeout(resolve, gapMs));
  }
  // Let the last events arrive.
  await new Promise((resolve) => setTimeout(resolve, 500));
  const delivered = await Promise.all(
    kids.map(
      (k) =>
        new Promise<Quantiles>((resolve, reject) => {
          k.once('message', (m) => ((m as { error?: string }).error ? reject(new Error((m as { error: string }).error)) : resolve(m as Quantiles)));
          k.send('report');
        }),
    ),
  );
  await Promise.all(kids.map((k) => new Promise((resolve) => (k.exitCode !== null ? resolve(null) : k.once('exit', resolve)))));
  return { watchers, put: quantiles(puts), delivered };
}

async function main(): Promise<void> {
  const writes = Number(flag('writes', '1500'));
  const gapMs = Number(flag('gap-ms', '5'));
  const counts = flag('watchers', '1,5').split(',').map(Number);
  const ops = Number(flag('ops', '1'));
  const given = flag('endpoint', '');
  const name = flag('name', 'watch-hop');
  const etcd = given ? undefined : await startEtcd({ bin: ensureEtcd((m) => console.error(`[watch-hop] ${m}`)) });
  const endpoint = given || (etcd?.endpoint as string);
  const store = await EtcdStore.connect({ endpoints: [endpoint] });
  const rounds = [];
  try {
    for (const n of counts) {
      const r = await round(store, endpoint, n, writes, gapMs, ops);
      rounds.push(r);
      console.error(
        `[watch-hop] ${n} watcher(s): put p50/p99 ${fmt(r.put.p50, 2)}/${fmt(r.put.p99, 2)} ms; delivered after the put was sent, p50/p99 ms: ${r.delivered.map((d) => `${fmt(d.p50, 2)}/${fmt(d.p99, 2)}`).join(' ')}`,
      );
    }
  } finally {
    await store.delete(PREFIX, { prefix: true }).catch(() => 0);
    await store.close();
    await etcd?.stop();
  }
  const command = `npx tsx bench/watch-hop.ts --writes ${writes} --gap-ms ${gapMs} --watchers ${counts.join(',')}${ops > 1 ? ` --ops ${ops}` : ''}${given ? ` --endpoint ${given} --name ${name}` : ''}`;
  const md = [
    '# One hop: a write to etcd and its delivery to watching processes',
    '',
    `\`${command}\` on ${machine()}, ${new Date().toISOString().slice(0, 16)} UTC; ${given ? 'the etcd of a run going on at the same time (see the README for which)' : 'a private etcd on loopback, nothing else running'}.`,
    `${writes} ${ops > 1 ? `transactions of ${ops} puts` : 'puts'} one after the other, ${gapMs} ms apart; each watcher is a process with an EtcdStore watch on the prefix.`,
    '',
    mdTable(
      ['watchers', 'write answered, p50 / p99 / max ms', 'delivered to each watcher after the put was sent, p50 / p99 / max ms'],
      rounds.map((r) => [
        r.watchers,
        `${fmt(r.put.p50, 2)} / ${fmt(r.put.p99, 2)} / ${fmt(r.put.max, 1)}`,
        r.delivered.map((d) => `${fmt(d.p50, 2)} / ${fmt(d.p99, 2)} / ${fmt(d.max, 1)} (${d.n})`).join(' · '),
      ]),
    ),
  ].join('\n');
  for (const p of writeResults(name, { command, machine: machine(), writes, gapMs, ops, rounds }, md, resultsDir(false, 'watch-hop')))
    console.error(`[watch-hop] wrote ${p}`);
}

if (process.argv[2] === '--watcher') await watcher(process.argv[3] as string, Number(process.argv[4]));
else await main();
