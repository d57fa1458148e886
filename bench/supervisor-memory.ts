/**
 * What the process executor's per-task supervisor (src/monitor/supervisor.js) costs in memory:
 * starts `--tasks` tasks (`sleep`) through ProcessExecutor, as a monitor does (no store report),
 * waits for them to settle, and reads from /proc, per task, the RSS and the PSS (each shared page
 * divided among the processes that map it) and private memory (what one more task adds) of its supervisor (a Node
 * process), of the task's wrapper shell and its watchdog subshell, and of the task itself; then
 * the same for a bare `node -e` process, the floor of any supervisor written for Node. Linux only.
 * Writes bench/results/supervisor-memory/supervisor-memory.{json,md}.
 *
 * Run: npx tsx bench/supervisor-memory.ts [--tasks 10] [--settle-ms 2000]
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ProcessExecutor } from '../src/monitor/executor.ts';
import { SystemClock } from '../src/util/clock.ts';
import { machine, mdTable, resultsDir, writeResults } from './lib/report.ts';

function arg(name: string): string | undefined {
  const i = process.argv.indexOf(name);
  return i >= 0 ? process.argv[i + 1] : undefined;
}
const tasks = Number(arg('--tasks') ?? 10);
const settleMs = Number(arg('--settle-ms') ?? 2000);
if (!Number.isInteger(tasks) || tasks < 1 || tasks > 200) throw new Error(`--tasks must be an integer from 1 to 200, not ${arg('--tasks')}`);
if (!Number.isFinite(settleMs) || settleMs < 0) throw new Error(`--settle-ms must be a number of ms ≥ 0, not ${arg('--settle-ms')}`);

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** RSS, PSS and private (clean + dirty) memory of a process, kB (smaps_rollup: Linux 4.14+). */
function mem(pid: number): { rssKb: number; pssKb: number; privateKb: number } | undefined {
  try {
    const t = readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8');
    const kb = (k: string): number => Number(new RegExp(`^${k}:\\s+(\\d+) kB`, 'm').exec(t)?.[1] ?? NaN);
    return { rssKb: kb('Rss'), pssKb: kb('Pss'), privateKb: kb('Private_Clean') + kb('Private_Dirty') };
  } catch {
    return undefined;
  }
}

/** Pids of a process group's members with their command names. */
function groupMembers(pgid: number): { pid: number; comm: string }[] {
  const out: { pid: number; comm: string }[] = [];
  for (const e of readdirSync('/proc')) {
    if (!/^\d+$/.test(e)) continue;
    try {
      const stat = readFileSync(`/proc/${e}/stat`, 'utf8');
      const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      if (Number(f[2]) === pgid && f[0] !== 'Z') out.push({ pid: Number(e), comm: stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')')) });
    } catch {
      // gone
    }
  }
  return out;
}

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length === 0 ? NaN : (s[Math.floor((s.length - 1) / 2)] as number);
};

const dir = mkdtempSync(join(tmpdir(), 'tarcil-sup-mem-'));
const clock = new SystemClock();
const ex = new ProcessExecutor({ clock, logDir: join(dir, 'logs'), pin: false });
ex.setDeadline('bench', 3_600_000);
const handles = Array.from({ length: tasks }, (_, i) =>
  ex.start({ job: 'mem', task: i, ruIndex: 0, revision: 1, server: 'bench', command: { argv: ['sleep', '600'] } }, () => undefined),
);
const bare = spawn(process.execPath, ['-e', 'setInterval(() => {}, 1000)'], { stdio: 'ignore' });
try {
  await sleep(settleMs);
  const rows: Record<string, { rssKb: number[]; pssKb: number[]; privateKb: number[] }> = {};
  const add = (what: string, m: { rssKb: number; pssKb: number; privateKb: number } | undefined): void => {
    if (!m) return;
    const r = (rows[what] ??= { rssKb: [], pssKb: [], privateKb: [] });
    r.rssKb.push(m.rssKb);
    r.pssKb.push(m.pssKb);
    r.privateKb.push(m.privateKb);
  };
  for (const [i, h] of handles.entries()) {
    if (h.pid !== undefined) add('supervisor (node supervisor.js)', mem(h.pid));
    const pgid = Number(readFileSync(join(dir, 'logs', 'mem', `${i}-1.pid`), 'utf8').trim());
    for (const m of groupMembers(pgid))
      add(m.pid === pgid ? 'wrapper shell (sh -c)' : m.comm === 'sh' ? 'watchdog subshell (sh)' : `task (${m.comm})`, mem(m.pid));
  }
  if (bare.pid !== undefined) add('bare node -e (floor of a Node supervisor)', mem(bare.pid));
  const summary = Object.fromEntries(
    Object.entries(rows).map(([k, v]) => [
      k,
      {
        n: v.rssKb.length,
        rssMbMedian: +(median(v.rssKb) / 1024).toFixed(1),
        pssMbMedian: +(median(v.pssKb) / 1024).toFixed(1),
        privateMbMedian: +(median(v.privateKb) / 1024).toFixed(1),
      },
    ]),
  );
  const data = { machine: machine(), node: process.version, tasks, settleMs, perProcess: summary };
  const md = [
    '# Memory of the task supervisor',
    '',
    `\`npx tsx bench/supervisor-memory.ts ${process.argv.slice(2).join(' ')}\`, ${machine()}: ${tasks} tasks (\`sleep 600\`) under the process executor, read ${settleMs} ms after their start. PSS divides each shared page among the processes mapping it; private memory (clean + dirty pages no other process maps) is what one more such process adds.`,
    '',
    mdTable(
      ['process', 'count', 'RSS median (MB)', 'PSS median (MB)', 'private median (MB)'],
      Object.entries(summary).map(([k, v]) => [k, v.n, v.rssMbMedian, v.pssMbMedian, v.privateMbMedian]),
    ),
    '',
  ].join('\n');
  const [json] = writeResults('supervisor-memory', data, md, resultsDir(false, 'supervisor-memory'));
  process.stdout.write(`${md}\n${json}\n`);
} finally {
  bare.kill('SIGKILL');
  await Promise.all(handles.map((h) => h.kill()));
  rmSync(dir, { recursive: true, force: true });
}
