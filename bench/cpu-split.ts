/**
 * Where a cell's processes spend their CPU, by kind of work: the self time of each `--cpu-prof`
 * profile in a folder (one per process and thread), split into the runtime's own work, talking to
 * etcd (gRPC, protobuf, HTTP/2, the etcd3 client, the store adapter), following the cell (watch
 * events into the view), decisions, owner bookkeeping, API serving and the node side. Used to say
 * what a placement costs beyond its decision, next to the ceiling's CPU per task.
 *
 *   TARCIL_NODE_ARGS='--cpu-prof --cpu-prof-dir=/tmp/prof' TARCIL_KILL_GRACE_MS=15000 \
 *     npx tsx bench/ceiling.ts --loads 0.15 --minutes 3 --name prof
 *   npx tsx bench/cpu-split.ts /tmp/prof [--out bench/results/ceiling/<name>.md] [--title text]
 *
 * A profile whose self time is mostly node-side code is the hollow process; the others with any
 * scheduler code are front-ends. Worker threads with (almost) no samples are left out.
 */
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fmt, mdTable } from './lib/report.ts';

interface Profile {
  nodes: { id: number; callFrame: { functionName: string; url: string } }[];
  samples: number[];
  timeDeltas: number[];
  startTime: number;
  endTime: number;
}

/** Kinds of work, first match wins: [name, test on the sample's leaf frame]. */
const KINDS: [string, (url: string, fn: string) => boolean][] = [
  ['idle', (_u, f) => f === '(idle)'],
  ['GC', (_u, f) => f === '(garbage collector)'],
  ['HTTP/2 and sockets', (u) => /^node:.*(http2|net|stream_base)/.test(u)],
  ['runtime (promises, timers, events, streams, buffers, (program))', (u) => u === '' || u.startsWith('node:')],
  ['gRPC, protobuf, etcd3 client', (u) => /node_modules\/(@grpc|protobufjs|@protobufjs|etcd3|cockatiel|long)\//.test(u) || u.includes('/gen/')],
  ['other packages', (u) => u.includes('node_modules')],
  ['store adapter (src/store)', (u) => u.includes('/src/store/')],
  ['watch events into the view', (u) => /\/src\/(agent\/(cache|follow|shared-view|handoff)|sampling\/cluster-state|state\/records)\.ts/.test(u)],
  [
    'decisions (sampling, quality, admission, the agent)',
    (u) => /\/src\/(sampling|quality|admission)\/|\/src\/agent\/(core|agent|chunks|commit|attempt|gang|conflict-cause)\.ts/.test(u),
  ],
  ['owner bookkeeping (owner, state, tenancy)', (u) => /\/src\/(owner|agent|state|tenancy)\//.test(u)],
  ['API serving (src/frontend, src/rpc, src/node)', (u) => /\/src\/(frontend|rpc|node)\//.test(u)],
  ['node side (src/monitor)', (u) => u.includes('/src/monitor/')],
  ['other', () => true],
];

export function cpuSplit(path: string): { cpuS: number; wallS: number; byKind: Map<string, number> } {
  const p = JSON.parse(readFileSync(path, 'utf8')) as Profile;
  const frame = new Map(p.nodes.map((x) => [x.id, x.callFrame]));
  const byKind = new Map<string, number>();
  let busyUs = 0;
  p.samples.forEach((id, i) => {
    const f = frame.get(id);
    const us = p.timeDeltas[i + 1] ?? 0;
    const kind = f ? (KINDS.find(([, t]) => t(f.url, f.functionName))?.[0] ?? 'other') : 'other';
    if (kind === 'idle') return;
    busyUs += us;
    byKind.set(kind, (byKind.get(kind) ?? 0) + us);
  });
  return { cpuS: busyUs / 1e6, wallS: (p.endTime - p.startTime) / 1e6, byKind };
}

function main(): void {
  const dir = process.argv[2];
  if (!dir) throw new Error('usage: npx tsx bench/cpu-split.ts <folder of .cpuprofile files> [--out file.md] [--title text]');
  const flag = (name: string): string | undefined => {
    const i = process.argv.indexOf(`--${name}`);
    return i >= 0 ? process.argv[i + 1] : undefined;
  };
  const runs = readdirSync(dir)
    .filter((f) => f.endsWith('.cpuprofile'))
    .sort()
    .map((f) => ({ file: f, ...cpuSplit(join(dir, f)) }))
    .filter((r) => r.cpuS > 0.05 * r.wallS);
  const share = (r: (typeof runs)[number], k: string): number => (r.byKind.get(k) ?? 0) / 1e6 / r.cpuS;
  let fe = 0;
  const named = runs.map((r) => ({ ...r, name: share(r, 'node side (src/monitor)') > 0.1 ? 'hollow nodes' : `front-end ${++fe}` }));
  const kinds = KINDS.map(([k]) => k).filter((k) => k !== 'idle' && named.some((r) => (r.byKind.get(k) ?? 0) > 0));
  const table = mdTable(
    ['kind of work', ...named.map((r) => `${r.name}: % of ${fmt(r.cpuS, 0)} s CPU`)],
    kinds.map((k) => [k, ...named.map((r) => fmt(100 * share(r, k), 1))]),
  );
  const text = `# ${flag('title') ?? 'Where the CPU goes'}\n\nProfiles: ${named.map((r) => `${r.name} ${r.file} (${fmt(r.wallS, 0)} s)`).join('; ')}.\n\n${table}\n`;
  const out = flag('out');
  if (out) writeFileSync(out, text);
  process.stdout.write(text);
}

main();
