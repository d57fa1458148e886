/**
 * Resident memory and CPU time of a process from Linux's /proc, for benchmarks that watch
 * several processes over time (RSS in MB, CPU in seconds since the process started).
 */
import { readFileSync } from 'node:fs';

/** Clock ticks per second of /proc/<pid>/stat (USER_HZ; 100 on every Linux this runs on). */
const HZ = 100;

export interface ProcSample {
  /** The process sampled: a restarted one (a new pid under the same name) shares no CPU time with its predecessor. */
  pid: number;
  rssMb: number;
  cpuS: number;
}

/** The process's RSS and CPU time now, or undefined once it has gone. */
export function procSample(pid: number): ProcSample | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Fields after the command name (which may contain spaces) start after the last ')'.
    const rest = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const utime = Number(rest[11]);
    const stime = Number(rest[12]);
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    const rss = /VmRSS:\s+(\d+) kB/.exec(status);
    return { pid, rssMb: rss ? Number(rss[1]) / 1024 : 0, cpuS: (utime + stime) / HZ };
  } catch {
    return undefined;
  }
}

/** CPU share (1 = one core) of a process between two samples taken `ms` apart; NaN when they are of two processes (a restart between them). */
export function cpuShare(a: ProcSample | undefined, b: ProcSample | undefined, ms: number): number {
  if (!a || !b || ms <= 0 || a.pid !== b.pid) return NaN;
  return (b.cpuS - a.cpuS) / (ms / 1000);
}

/** CPU seconds (user + system) the process has used (/proc/<pid>/stat). */
export function cpuSeconds(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(f[11]) + Number(f[12])) / HZ;
}

/** A process's Prometheus /metrics on loopback, as series (name with labels) → value. */
export async function scrapeMetrics(port: number): Promise<Map<string, number>> {
  const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
  const out = new Map<string, number>();
  for (const line of text.split('\n')) {
    if (line.startsWith('#') || line.trim() === '') continue;
    const sp = line.lastIndexOf(' ');
    out.set(line.slice(0, sp), Number(line.slice(sp + 1)));
  }
  return out;
}
