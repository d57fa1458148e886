/**
 * What a process ran in its longest event-loop stalls: the samples of its CPU profile (a
 * `--cpu-prof` file) between the two ticks of bench/lib/turn-probe.mjs around each stall, by
 * kind. `idle` is V8's name for time outside JavaScript with the loop marked idle: waiting in
 * epoll, and also native work done before JavaScript is entered, such as nghttp2's parsing of a
 * read. Used by bench/watch-burst.ts (`--profile`).
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

interface CallFrame {
  functionName: string;
  url: string;
  lineNumber: number;
}
interface Profile {
  nodes: { id: number; callFrame: CallFrame; children?: number[] }[];
  startTime: number;
  samples: number[];
  timeDeltas: number[];
}
/** The probe's stalls: [epoch ms at the tick, ms late, ms run, ms waited, µs at the tick before, µs at this one]. */
interface Probe {
  stalls: [number, number, number, number, number?, number?][];
}

const short = (f: CallFrame): string => `${f.functionName || '(anonymous)'}@${f.url.split('/').slice(-2).join('/')}:${f.lineNumber}`;

/** The kind of a sample, from its stack (leaf first). */
function kind(stack: CallFrame[]): string {
  const has = (fn: string, url?: string): boolean => stack.some((f) => f.functionName === fn && (!url || f.url.includes(url)));
  const leaf = stack[0]?.functionName;
  if (leaf === '(idle)') return 'idle (epoll, or native work such as HTTP/2 parsing)';
  if (leaf === '(garbage collector)') return 'GC';
  if (leaf === '(program)') return '(program)';
  if (has('runPumps')) return 'WatchJob pumps';
  if (has('turn', 'connection-limits')) return "pacer's turn (calls handed over)";
  if (has('onSessionHeaders')) return "HTTP/2 streams made (Node's onSessionHeaders)";
  if (stack.some((f) => f.url.includes('job-watch-generation'))) return 'WatchJob generation (snapshot read, events encoded)';
  const entry = stack.at(-1);
  const inner = stack
    .slice(0, -1)
    .reverse()
    .find((f) => f.url !== '' && !f.url.startsWith('node:'));
  return `${entry?.functionName || '(anonymous)'} → ${inner ? short(inner) : '-'}`;
}

/** A report of the `top` stalls (by the loop's own run time) between epoch ms `from` and `to`. */
export function stallProfile(dir: string, from: number, to: number, top: number): string {
  const file = readdirSync(dir)
    .filter((f) => f.endsWith('.cpuprofile'))
    .sort()[0];
  if (!file) return 'no profile\n';
  const p = JSON.parse(readFileSync(join(dir, file), 'utf8')) as Profile;
  const probe = JSON.parse(readFileSync(join(dir, 'probe.json'), 'utf8')) as Probe;
  const byId = new Map(p.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of p.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const kinds = new Map<number, string>();
  const kindOf = (id: number): string => {
    let k = kinds.get(id);
    if (k === undefined) {
      const stack: CallFrame[] = [];
      for (let x: number | undefined = id; x !== undefined; x = parent.get(x)) stack.push(byId.get(x)!.callFrame);
      stack.pop(); // (root)
      kinds.set(id, (k = kind(stack)));
    }
    return k;
  };
  let t = p.startTime;
  const times = p.timeDeltas.map((d) => (t += d));
  const stalls = probe.stalls.filter(([at, , , , a, b]) => at >= from && at <= to && a !== undefined && b !== undefined).sort((x, y) => y[2] - x[2]);
  const lines: string[] = [];
  for (const [, late, run, wait, a, b] of stalls.slice(0, top)) {
    const by = new Map<string, number>();
    for (let i = 0; i < times.length; i++) {
      const at = times[i]!;
      if (at < a! || at > b!) continue;
      const k = kindOf(p.samples[i]!);
      by.set(k, (by.get(k) ?? 0) + ((times[i + 1] ?? at) - at) / 1000);
    }
    lines.push(`stall ${late} ms late: the loop's thread ran ${run} ms, waited ${wait} ms for a core; its samples (ms):`);
    for (const [k, ms] of [...by].sort((x, y) => y[1] - x[1]).slice(0, 10)) lines.push(`  ${ms.toFixed(1).padStart(6)}  ${k}`);
  }
  return `${lines.join('\n')}\n`;
}
