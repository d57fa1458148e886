/**
 * The cost in etcd of a put bound to a lease that already holds many keys, as a plain Put and as
 * a one-op transaction (what EtcdStore.put sends since etcd before 3.4.27 checks a plain Put
 * against every key of its lease: etcd-io/etcd#15993). A hollow cell's lease holds every RU of
 * its nodes, and each load report a node writes is such a put.
 *
 *   npx tsx bench/lease-put.ts [--keys 160000] [--puts 400] [--rounds 5]
 *
 * Real etcd on loopback. For each lease size, rounds of `puts` sequential puts each way,
 * interleaved; the median wall time per put and the etcd CPU per put (from /proc) are reported.
 * Results: bench/results/lease-put/lease-put.{md,json}.
 */
import { Etcd3 } from 'etcd3';
import { median } from 'simple-statistics';
import { ensureEtcd, startEtcd } from '../test/support/etcd.ts';
import { openStore } from '../src/store/index.ts';
import { procSample } from './lib/proc-stats.ts';
import { fmt, machine, mdTable, resultsDir, writeResults } from './lib/report.ts';
import { execFileSync } from 'node:child_process';

function flag(name: string, dflt: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 && process.argv[i + 1] !== undefined ? (process.argv[i + 1] as string) : dflt;
}
const MAX_KEYS = Number(flag('keys', '160000'));
const PUTS = Number(flag('puts', '400'));
const ROUNDS = Number(flag('rounds', '5'));
const SIZES = [0, 10_000, 40_000, MAX_KEYS].filter((n, i, a) => n <= MAX_KEYS && a.indexOf(n) === i);

async function main(): Promise<void> {
  const etcd = await startEtcd({ bin: ensureEtcd((l) => process.stdout.write(`${l}\n`)) });
  const pid = Number(
    execFileSync('pgrep', ['-f', '--', `--data-dir ${etcd.dataDir}`])
      .toString()
      .trim()
      .split('\n')[0],
  );
  const raw = new Etcd3({ hosts: etcd.endpoint });
  const store = await openStore(etcd.endpoint.replace('http://', 'etcd://'));
  const lease = await store.grantLease(600, { keepAlive: false });
  const rows: { keys: number; way: string; msPerPut: number; etcdCpuMsPerPut: number }[] = [];
  let attached = 0;
  const value = JSON.stringify({ state: 'free' });
  for (const size of SIZES) {
    // Attach keys to the lease up to this size (transactions of 128 puts).
    while (attached < size) {
      const n = Math.min(128, size - attached);
      await store.txn({
        compare: [],
        success: Array.from({ length: n }, (_, i) => ({ type: 'put' as const, key: `/lp/rus/${attached + i}`, value, lease: lease.id })),
      });
      attached += n;
    }
    const per: Record<string, { ms: number[]; cpu: number[] }> = { 'plain Put': { ms: [], cpu: [] }, 'one-op txn (EtcdStore.put)': { ms: [], cpu: [] } };
    for (let r = 0; r < ROUNDS; r++) {
      for (const way of Object.keys(per)) {
        const before = procSample(pid);
        const t0 = performance.now();
        for (let i = 0; i < PUTS; i++) {
          const key = `/lp/reports/${i % 64}`;
          if (way === 'plain Put') await raw.put(key).value(value).lease(lease.id);
          else await store.put(key, value, { lease: lease.id });
        }
        const wall = performance.now() - t0;
        const after = procSample(pid);
        per[way]?.ms.push(wall / PUTS);
        per[way]?.cpu.push((1000 * ((after?.cpuS ?? 0) - (before?.cpuS ?? 0))) / PUTS);
      }
    }
    for (const [way, v] of Object.entries(per)) {
      rows.push({ keys: size, way, msPerPut: median(v.ms), etcdCpuMsPerPut: median(v.cpu) });
      process.stdout.write(`${size} keys on the lease, ${way}: ${fmt(median(v.ms), 3)} ms/put, etcd CPU ${fmt(median(v.cpu), 3)} ms/put\n`);
    }
  }
  raw.close();
  await store.close();
  await etcd.stop();
  const version = execFileSync(
    ensureEtcd(() => undefined),
    ['--version'],
  )
    .toString()
    .split('\n')[0];
  const md = [
    '# A put bound to a lease that holds many keys: plain Put against a one-op transaction',
    '',
    `\`npx tsx bench/lease-put.ts ${process.argv.slice(2).join(' ')}\` on ${machine()}, ${version}; ${PUTS} sequential puts per round, ${ROUNDS} rounds interleaved, medians.`,
    '',
    mdTable(
      ['keys on the lease', 'how', 'ms per put (wall)', 'etcd CPU ms per put'],
      rows.map((r) => [String(r.keys), r.way, fmt(r.msPerPut, 3), fmt(r.etcdCpuMsPerPut, 3)]),
    ),
    '',
  ].join('\n');
  writeResults('lease-put', { rows }, md, resultsDir(false, 'lease-put'));
}

main().catch((e: unknown) => {
  process.stderr.write(`${String(e instanceof Error ? e.stack : e)}\n`);
  process.exit(1);
});
