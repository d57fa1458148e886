/**
 * What a running cell writes, counted from a watch: for `--seconds`, the puts and deletes under
 * each top-level key of the cell's prefix (jobs/, tasks/, rus/, …) with their mean value size, and
 * for the jobs seen from their submission (`queued`) to a final state, how many times each record
 * was written and in which states.
 *
 *   npx tsx bench/watch-count.ts --endpoint etcd://127.0.0.1:PORT [--prefix /tarcil/soak/] [--seconds 60]
 *
 * Point it at a soak's etcd (its log says "etcd on http://…") about a minute into the load. It adds
 * one watcher of everything to the cell, so the run it watches is a diagnostic one, not one to take
 * latencies from. Prints a table; writes nothing.
 */
import { openStore } from '../src/store/index.ts';
import { parseJson } from '../src/state/records.ts';
import type { LiveJobRecord } from '../src/state/live-records.ts';
import { isFinalJob } from '../src/state/live-records.ts';
import { mdTable } from './lib/report.ts';

function flag(name: string, dflt: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 && process.argv[i + 1] !== undefined ? (process.argv[i + 1] as string) : dflt;
}

const endpoint = flag('endpoint', '');
const prefix = flag('prefix', '/tarcil/soak/');
const seconds = Number(flag('seconds', '60'));
if (!/^etcds?:\/\//.test(endpoint)) throw new Error('--endpoint etcd://host:port is required');
if (!(seconds > 0)) throw new Error('--seconds must be a positive number');

const store = await openStore(endpoint);
const byKind = new Map<string, { n: number; bytes: number }>();
const jobs = new Map<string, { states: string[]; tasks: number }>();
const w = await store.watch({
  prefix,
  fromRevision: (await store.revision()) + 1,
  onEvents: (b) => {
    for (const ev of b.events) {
      const rest = ev.kv.key.slice(prefix.length);
      const kind = `${rest.split('/')[0] ?? ''}/ ${ev.type}`;
      const s = byKind.get(kind) ?? { n: 0, bytes: 0 };
      s.n++;
      s.bytes += Buffer.byteLength(ev.kv.value);
      byKind.set(kind, s);
      if (ev.type !== 'put' || !rest.startsWith('jobs/')) continue;
      const rec = parseJson<LiveJobRecord>(ev.kv);
      if (!rec) continue;
      const j = jobs.get(ev.kv.key) ?? { states: [], tasks: rec.spec.tasks };
      j.states.push(rec.state);
      jobs.set(ev.kv.key, j);
    }
  },
  onError: (err) => {
    process.stderr.write(`watch ended: ${err.message}\n`);
  },
});
await new Promise((r) => setTimeout(r, seconds * 1000));
await w.close();
await store.close();

const rows = [...byKind].sort((a, b) => b[1].n - a[1].n).map(([k, s]) => [k, String(s.n), (s.bytes / s.n).toFixed(0)]);
process.stdout.write(`${mdTable(['key, event', `events in ${seconds} s`, 'mean value bytes'], rows)}\n\n`);
const whole = [...jobs.values()].filter((j) => j.states[0] === 'queued' && isFinalJob(j.states.at(-1) as LiveJobRecord['state']));
if (whole.length === 0) {
  process.stdout.write('no job was seen from its submission to its end\n');
} else {
  const per = new Map<string, number>();
  for (const j of whole) for (const s of j.states) per.set(s, (per.get(s) ?? 0) + 1);
  const writes = whole.reduce((a, j) => a + j.states.length, 0);
  const tasks = whole.reduce((a, j) => a + j.tasks, 0);
  process.stdout.write(
    `${whole.length} jobs seen from submission to end (${(tasks / whole.length).toFixed(1)} tasks each on average): ` +
      `${(writes / whole.length).toFixed(2)} writes of the job record each; by state: ` +
      `${[...per].map(([s, n]) => `${s} ${(n / whole.length).toFixed(2)}`).join(', ')}\n`,
  );
}
