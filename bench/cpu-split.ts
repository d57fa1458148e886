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
 *
 * `--inclusive 'fn@file,…'` adds a table of inclusive time: the share of each profile's busy time
 * with a function of that name (or ending in `.name`) from a file whose path ends in `file` on the
 * stack, counted once per sample.
 */
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { fmt, mdTable } from './lib/report.ts';

export interface Profile {
  nodes: { id: number; callFrame: { functionName: string; url: string }; children?: number[] }[];
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

function readProfile(path: string): Profile {
  return JSON.parse(readFileSync(path, 'utf8')) as Profile;
}

export function cpuSplit(p: Profile): { cpuS: number; wallS: number; byKind: Map<string, number> } {
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

/** Share of the profile's busy time with each entry (`fn@file`) on the stack. */
export function inclusiveShares(p: Profile, entries: readonly string[]): number[] {
  const parent = new Map<number, number>();
  for (const n of p.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const wanted = entries.map((e) => {
    const [fn, file] = e.split('@') as [string, string | undefined];
    return (f: { functionName: string; url: string }): boolean =>
      (f.functionName === fn || f.functionName.endsWith(`.${fn}`)) && (file === undefined || f.url.endsWith(file));
  });
  // Which entries each node's stack holds, computed once per node.
  const frame = new Map(p.nodes.map((x) => [x.id, x.callFrame]));
  const holds = new Map<number, boolean[]>();
  const stackOf = (id: number): boolean[] => {
    const known = holds.get(id);
    if (known) return known;
    const up = parent.get(id);
    const above = up === undefined ? wanted.map(() => false) : stackOf(up);
    const f = frame.get(id);
    const mine = wanted.map((w, i) => above[i] === true || (f !== undefined && w(f)));
    holds.set(id, mine);
    return mine;
  };
  const us = wanted.map(() => 0);
  let busy = 0;
  p.samples.forEach((id, i) => {
    if (frame.get(id)?.functionName === '(idle)') return;
    const dt = p.timeDeltas[i + 1] ?? 0;
    busy += dt;
    stackOf(id).forEach((on, k) => {
      if (on) us[k] = (us[k] as number) + dt;
    });
  });
  return us.map((x) => (busy > 0 ? x / busy : 0));
}

function main(): void {
  const dir = process.argv[2];
  if (!dir) throw new Error("usage: npx tsx bench/cpu-split.ts <folder of .cpuprofile files> [--out file.md] [--title text] [--inclusive 'fn@file,…']");
  const flag = (name: string): string | undefined => {
    const i = process.argv.indexOf(`--${name}`);
    return i >= 0 ? process.argv[i + 1] : undefined;
  };
  const runs = readdirSync(dir)
    .filter((f) => f.endsWith('.cpuprofile'))
    .sort()
    .map((f) => {
      const profile = readProfile(join(dir, f));
      return { file: f, profile, ...cpuSplit(profile) };
    })
    .filter((r) => r.cpuS > 0.05 * r.wallS);
  const share = (r: (typeof runs)[number], k: string): number => (r.byKind.get(k) ?? 0) / 1e6 / r.cpuS;
  let fe = 0;
  const named = runs.map((r) => ({ ...r, name: share(r, 'node side (src/monitor)') > 0.1 ? 'hollow nodes' : `front-end ${++fe}` }));
  const kinds = KINDS.map(([k]) => k).filter((k) => k !== 'idle' && named.some((r) => (r.byKind.get(k) ?? 0) > 0));
  const table = mdTable(
    ['kind of work', ...named.map((r) => `${r.name}: % of ${fmt(r.cpuS, 0)} s CPU`)],
    kinds.map((k) => [k, ...named.map((r) => fmt(100 * share(r, k), 1))]),
  );
  let text = `# ${flag('title') ?? 'Where the CPU goes'}\n\nProfiles: ${named.map((r) => `${r.name} ${r.file} (${fmt(r.wallS, 0)} s)`).join('; ')}.\n\n${table}\n`;
  const entries = (flag('inclusive') ?? '')
    .split(',')
    .map((e) => e.trim())
    .filter(Boolean);
  if (entries.length > 0) {
    const shares = named.map((r) => inclusiveShares(r.profile, entries));
    const incl = mdTable(
      ['on the stack', ...named.map((r) => `${r.name}: % of its CPU`)],
      entries.map((e, k) => [`\`${e}\``, ...shares.map((s) => fmt(100 * (s[k] as number), 1))]),
    );
    text += `\nInclusive time:\n\n${incl}\n`;
  }
  const out = flag('out');
  if (out) writeFileSync(out, text);
  process.stdout.write(text);
}

// Run as a command; imported (its tests), it only exports.
if (process.argv[1] !== undefined && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) main();
