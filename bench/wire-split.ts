/**
 * Where a call to etcd spends its time, seen on the wire: a packet capture of the loopback traffic
 * to the soak's etcd, read against the points the processes traced (TARCIL_TRACE_DIR), splits each
 * traced call into
 *   - the send delay: from the process's call (`store.sent`, `submit.sent`) to its request on the wire;
 *   - etcd: from the request on the wire to the first frame of the answer on the wire;
 *   - the receive delay: from the answer on the wire to the process having it (`store.answered`, …).
 * It also finds etcd's stalls: stretches of at least 5 ms in which a request was outstanding and
 * etcd answered nothing at all (on any connection).
 *
 *   TARCIL_TRACE_DIR=/tmp/t npx tsx bench/soak.ts --quick … &               (a run, traced)
 *   npx tsx bench/wire-split.ts capture --port <etcd's port> --seconds 20 --dir /tmp/cap   (while it runs)
 *   npx tsx bench/wire-split.ts analyse --port <etcd's port> --dir /tmp/cap --trace /tmp/t --name wire-split
 *
 * Needs Debian's `tshark` package (dumpcap captures, tshark decodes HTTP/2) and root or the
 * capture capability. A call is matched to its request by the job id that the request carries
 * (a placement commit, a submission, a node's start write): the first request of the same process
 * that names the job and falls between the call and its answer. Results: bench/results/wire-split/<name>.{md,json}.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fmt, machine, mdTable, pct, resultsDir, writeResults } from './lib/report.ts';

function flag(name: string, dflt: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 && process.argv[i + 1] !== undefined ? (process.argv[i + 1] as string) : dflt;
}

const mode = process.argv[2];
const port = Number(flag('port', '0'));
const dir = flag('dir', '/tmp/wire-split');
if (!Number.isInteger(port) || port <= 0) throw new Error('--port: the etcd client port (an integer) is required');

if (mode === 'capture') {
  const seconds = Number(flag('seconds', '20'));
  mkdirSync(dir, { recursive: true });
  // Which process holds which connection to etcd (client port → pid), taken as the capture starts.
  writeFileSync(join(dir, 'ss.txt'), execFileSync('ss', ['-tnpi', 'state', 'established', `( dport = :${port} )`], { encoding: 'utf8' }));
  const r = spawnSync('dumpcap', ['-q', '-i', 'lo', '-f', `tcp port ${port}`, '-w', join(dir, 'cap.pcapng'), '-a', `duration:${seconds}`], {
    encoding: 'utf8',
  });
  if (r.status !== 0) throw new Error(`dumpcap failed: ${r.stderr}`);
  process.stdout.write(`captured ${seconds} s of the traffic to port ${port} into ${dir}/cap.pcapng\n`);
} else if (mode === 'analyse') {
  analyse();
} else {
  throw new Error('usage: wire-split.ts capture|analyse --port P [--dir D] [--seconds S] [--trace DIR] [--name N]');
}

interface WireCall {
  req: number;
  resp?: number;
  path: string;
  job?: string;
}

function analyse(): void {
  const traceDir = flag('trace', '');
  const name = flag('name', 'wire-split');
  const pidOf = new Map<number, number>();
  for (const m of readFileSync(join(dir, 'ss.txt'), 'utf8').matchAll(
    new RegExp(`127\\.0\\.0\\.1:(\\d+)\\s+127\\.0\\.0\\.1:${port}\\s+users:\\(\\("\\w+",pid=(\\d+)`, 'g'),
  )) {
    pidOf.set(Number(m[1]), Number(m[2]));
  }
  const out = execFileSync(
    'tshark',
    [
      '-r',
      join(dir, 'cap.pcapng'),
      '-d',
      `tcp.port==${port},http2`,
      '-Y',
      'http2',
      '-T',
      'fields',
      '-E',
      'separator=/t',
      '-e',
      'frame.time_epoch',
      '-e',
      'tcp.srcport',
      '-e',
      'tcp.dstport',
      '-e',
      'http2.streamid',
      '-e',
      'http2.type',
      '-e',
      'http2.data.data',
      '-e',
      'http2.headers.path',
    ],
    { encoding: 'utf8', maxBuffer: 2 ** 31 - 1, stdio: ['ignore', 'pipe', 'ignore'] },
  );
  const calls = new Map<string, WireCall & { cport: number }>();
  const JOB = /j-[a-z0-9]{6,10}-[0-9a-f]{8}/;
  for (const line of out.split('\n')) {
    const f = line.split('\t');
    if (f.length < 5) continue;
    const t = Number(f[0]) * 1000;
    const toEtcd = Number(f[2]) === port;
    const cport = toEtcd ? Number(f[1]) : Number(f[2]);
    const sids = (f[3] ?? '').split(',');
    const types = (f[4] ?? '').split(',');
    const datas = f[5] ? f[5].split(',') : [];
    const path = (f[6] ?? '').split(',')[0]?.split('/').pop() ?? '';
    let di = 0;
    sids.forEach((sid, i) => {
      const type = types[i];
      if (!sid || sid === '0') return;
      const key = `${cport}/${sid}`;
      let c = calls.get(key);
      if (toEtcd) {
        if (type === '1' && !c) calls.set(key, (c = { cport, req: t, path }));
        if (type === '0') {
          const data = datas[di];
          if (c && c.job === undefined && data) c.job = JOB.exec(Buffer.from(data.replace(/:/g, ''), 'hex').toString('latin1'))?.[0];
          di++;
        }
      } else {
        if (c && c.resp === undefined) c.resp = t;
        if (type === '0') di++;
      }
    });
  }
  // etcd's stalls: nothing answered for >= 5 ms while a unary request was outstanding.
  const ev: [number, 1 | -1, string][] = [];
  for (const [key, c] of calls) {
    if (c.resp === undefined || /Watch|Lease/.test(c.path)) continue;
    ev.push([c.req, 1, key], [c.resp, -1, key]);
  }
  ev.sort((a, b) => a[0] - b[0] || b[1] - a[1]);
  const pending = new Map<string, number>();
  let lastAnswer = ev[0]?.[0] ?? 0;
  const stalls: number[] = [];
  for (const [t, kind, key] of ev) {
    if (kind === 1) {
      pending.set(key, t);
      continue;
    }
    if (pending.has(key)) {
      const from = Math.max(lastAnswer, Math.min(...pending.values()));
      if (t - from >= 5) stalls.push(t - from);
      pending.delete(key);
    }
    lastAnswer = t;
  }
  const span = ev.length > 0 ? (ev[ev.length - 1]![0] - ev[0]![0]) / 1000 : 0;
  const from = ev[0]?.[0] ?? 0;
  const to = ev[ev.length - 1]?.[0] ?? 0;
  // The wire's calls by process and job.
  const byJob = new Map<number, Map<string, WireCall[]>>();
  for (const c of calls.values()) {
    const pid = pidOf.get(c.cport);
    if (pid === undefined || !c.job || c.resp === undefined) continue;
    let m = byJob.get(pid);
    if (!m) byJob.set(pid, (m = new Map<string, WireCall[]>()));
    const list = m.get(c.job) ?? [];
    list.push(c);
    m.set(c.job, list);
  }
  const rows: (string | number)[][] = [];
  const data: Record<string, unknown>[] = [];
  const q = (xs: number[]): string => `${fmt(pct(xs, 0.5), 1)} / ${fmt(pct(xs, 0.9), 1)} / ${fmt(pct(xs, 0.99), 1)}`;
  for (const file of traceDir
    ? readdirSync(traceDir)
        .filter((x) => x.endsWith('.trace'))
        .sort()
    : []) {
    const pid = Number(file.split('.')[0]);
    const wire = byJob.get(pid);
    if (!wire) continue;
    const lines = readFileSync(join(traceDir, file), 'utf8').split('\n');
    const role = lines.some((l) => l.includes(' node.seen ')) ? 'hollow' : lines.some((l) => l.includes(' submit.sent ')) ? 'front-end' : 'other';
    const kinds: [string, string, string][] =
      role === 'hollow'
        ? [['store.sent', 'store.answered', 'start write']]
        : [
            ['submit.sent', 'submit.answered', 'submission'],
            ['store.sent', 'store.answered', 'placement commit'],
          ];
    for (const [sentPt, answeredPt, what] of kinds) {
      const sent = new Map<string, number>();
      const send: number[] = [];
      const etcd: number[] = [];
      const recv: number[] = [];
      const whole: number[] = [];
      for (const l of lines) {
        const [ts, point, key] = l.split(' ');
        if (!ts || !key) continue;
        const t = Number(ts);
        const job = key.split('#')[0] as string;
        if (point === sentPt && !sent.has(key)) sent.set(key, t);
        else if (point === answeredPt && sent.has(key)) {
          const s = sent.get(key) as number;
          sent.set(key, NaN);
          if (Number.isNaN(s) || s < from || t > to) continue;
          const w = (wire.get(job) ?? []).find((c) => c.req >= s - 0.5 && (c.resp as number) <= t + 0.5);
          if (!w) continue;
          send.push(w.req - s);
          etcd.push((w.resp as number) - w.req);
          recv.push(t - (w.resp as number));
          whole.push(t - s);
        }
      }
      if (whole.length === 0) continue;
      rows.push([`${role} ${pid}`, what, whole.length, q(send), q(etcd), q(recv), q(whole)]);
      data.push({ pid, role, what, n: whole.length, send, etcd, recv, whole });
    }
  }
  // Calls by process and method (the connection's owner from ss; watch and lease streams apart).
  const methods = new Map<number, Map<string, number>>();
  for (const c of calls.values()) {
    const pid = pidOf.get(c.cport);
    if (pid === undefined || !c.path) continue;
    let m = methods.get(pid);
    if (!m) methods.set(pid, (m = new Map<string, number>()));
    m.set(c.path, (m.get(c.path) ?? 0) + 1);
  }
  const methodRows = [...methods]
    .sort((a, b) => a[0] - b[0])
    .map(([pid, m]) => [
      String(pid),
      [...m]
        .sort((a, b) => b[1] - a[1])
        .map(([p, n]) => `${p} ${n}`)
        .join(', '),
    ]);
  const md = [
    '# Where a call to etcd spends its time, on the wire',
    '',
    `\`npx tsx bench/wire-split.ts analyse --port ${port} --dir ${dir}${traceDir ? ` --trace ${traceDir}` : ''} --name ${name}\` on ${machine()}: ${fmt(span, 1)} s of loopback traffic to etcd, ${calls.size} calls.`,
    '',
    mdTable(['process', 'call', 'matched', 'send delay p50 / p90 / p99 ms', 'etcd (request → answer on the wire)', 'receive delay', 'the whole call'], rows),
    '',
    'Calls to etcd in the capture, by process (pid) and method:',
    '',
    mdTable(['pid', 'calls'], methodRows),
    '',
    `etcd's stalls (a request outstanding, no answer on any connection, for 5 ms or more): ${stalls.length}, ${fmt(
      stalls.reduce((a, b) => a + b, 0),
      0,
    )} ms in all (${fmt((100 * stalls.reduce((a, b) => a + b, 0)) / 1000 / Math.max(span, 1e-9), 1)}% of the time); p50 / p90 / max ${fmt(pct(stalls, 0.5), 1)} / ${fmt(pct(stalls, 0.9), 1)} / ${fmt(Math.max(0, ...stalls), 1)} ms.`,
    '',
  ].join('\n');
  process.stdout.write(md);
  writeResults(
    name,
    {
      port,
      spanS: span,
      calls: calls.size,
      methods: Object.fromEntries([...methods].map(([pid, m]) => [pid, Object.fromEntries(m)])),
      stalls,
      processes: data,
    },
    md,
    resultsDir(false, 'wire-split'),
  );
}
