/**
 * The cell of a fault-injection run, as a user would deploy it on loopback: a 3-member etcd, two
 * `tarcil server` front-ends and four `tarcil monitor --executor process` nodes, each process
 * reaching every etcd member through its own TCP fault proxies (so the nemesis can cut or delay
 * one process's connections). Tasks run test/fault's task script, which appends a start line and
 * an end line to an execution-record file that does not depend on etcd; a watcher follows that
 * file and notes when a run's process disappears without writing its end. Every child process
 * (tarcil, task processes, etcd) is killed on stop() and, synchronously, on exit.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import {
  appendFileSync,
  closeSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  readSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openStore } from '../../src/store/index.ts';
import type { ClusterStore } from '../../src/store/types.ts';
import { EtcdCluster } from '../support/etcd-cluster.ts';
import type { NemesisProc, NemesisTarget } from '../support/nemesis.ts';
import { tcpProxy, type TcpProxy } from '../support/proxy.ts';

const BIN = join(import.meta.dirname, '..', '..', 'src', 'cli', 'bin.js');

/**
 * One run of a task: S when it starts, E when it ends by itself (exit 0 follows), K when it is
 * signalled. The node is the monitor's working directory; the revision is the RU record revision
 * in the task's log file name (<log-dir>/<job>/<task>-<revision>.stdout), which the monitor also
 * writes as `placedRevision` in the task's `running` record.
 *
 * A stop signals the task's whole process group, a `date` running at that moment included: its
 * output is then empty. So the start time is read before the trap is set (a signal then ends the
 * shell too, and the run leaves no record at all), and an end time that comes back empty is read
 * again: every line written is a whole record (the checker refuses any other).
 */
export const TASK_SCRIPT = `#!/bin/sh
# fault-suite task: $1 = seconds to run; FAULT_RECORDS = execution-record file
f="$FAULT_RECORDS"
node=$(basename "$PWD")
log=$(readlink /proc/$$/fd/1)
rev=\${log##*-}; rev=\${rev%.stdout}
ns=$(date +%s%N)
id="$node:$$:$ns"
now() { t=$(date +%s%3N); [ -n "$t" ] || t=$(date +%s%3N); }
rec() { echo "$1 $TARCIL_JOB $TARCIL_TASK $node $TARCIL_RU $rev $$ $id $2" >> "$f"; }
trap 'now; rec K "$t"; exit 143' TERM INT HUP
rec S "\${ns%??????}"
sleep "$1" &
wait $!
now; rec E "$t"
`;

export interface CellOptions {
  leaseTtlS: number;
  /** The monitors' --disconnect-grace, ms (default: the monitor's own). */
  graceMs?: number;
  frontEnds?: number;
  monitors?: number;
  rus?: number;
  agents?: number;
  say?: (line: string) => void;
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Pids of every process whose working directory is dir or below it (Linux /proc). */
export function processesUnder(dir: string): number[] {
  const out: number[] = [];
  for (const e of readdirSync('/proc')) {
    if (!/^\d+$/.test(e) || Number(e) === process.pid) continue;
    try {
      const cwd = readlinkSync(`/proc/${e}/cwd`);
      if (cwd === dir || cwd.startsWith(`${dir}/`)) out.push(Number(e));
    } catch {
      // gone, or not ours
    }
  }
  return out;
}

function killPids(pids: readonly number[]): void {
  for (const pid of pids) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // already gone
    }
  }
}

/** Alive and not a zombie. */
export function alive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
  } catch {
    return false;
  }
}

/**
 * A tarcil process: started with fixed flags, reaching etcd through its own proxies. With
 * `--port 0` it binds a free port itself; start() reads that port from its "listening on" line,
 * and a restart asks for the same port again (the workload's clients dial that address).
 */
export class TarcilChild implements NemesisProc {
  private child: ChildProcess | undefined;
  private tail = '';
  /** The port of its gRPC service, from the "listening on" line of its last start. */
  port: number | undefined;

  constructor(
    readonly name: string,
    readonly kind: 'fe' | 'monitor',
    private args: string[],
    readonly cwd: string,
    readonly proxies: readonly TcpProxy[],
    private readonly logFile: string,
  ) {}

  get pid(): number | undefined {
    const c = this.child;
    return c && c.exitCode === null && c.signalCode === null ? c.pid : undefined;
  }

  output(): string {
    return this.tail;
  }

  /** Appends to the process's log file; output that arrives after the run directory is gone is dropped. */
  private note(s: string): void {
    try {
      appendFileSync(this.logFile, s);
    } catch {
      // the run directory was removed at the end of the run
    }
  }

  async start(timeoutMs = 60_000): Promise<void> {
    // TARCIL_NODE_ARGS (e.g. `--cpu-prof --cpu-prof-dir=/tmp/prof`) goes to node first, to profile the processes of a run.
    const nodeArgs = (process.env.TARCIL_NODE_ARGS ?? '').split(' ').filter(Boolean);
    const c = spawn(process.execPath, [...nodeArgs, BIN, ...this.args], {
      cwd: this.cwd,
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, TARCIL_LOG: 'warn' },
    });
    this.child = c;
    this.tail = '';
    this.note(`--- ${new Date().toISOString()} start\n`);
    await new Promise<void>((resolve, reject) => {
      const t = setTimeout(() => reject(new Error(`${this.name} did not start in ${timeoutMs} ms:\n${this.tail.slice(-3000)}`)), timeoutMs);
      const onData = (d: Buffer): void => {
        const s = d.toString();
        this.tail = (this.tail + s).slice(-20_000);
        this.note(s);
        const listening = /listening on \S+:(\d+)\D/.exec(this.tail);
        if (listening) {
          clearTimeout(t);
          this.port = Number(listening[1]);
          const p = this.args.indexOf('--port');
          if (p >= 0 && this.args[p + 1] === '0') this.args = this.args.with(p + 1, String(this.port));
          resolve();
        }
      };
      c.stdout?.on('data', onData);
      c.stderr?.on('data', onData);
      c.once('exit', (code, sig) => {
        clearTimeout(t);
        this.note(`--- ${new Date().toISOString()} exit ${code ?? sig}\n`);
        reject(new Error(`${this.name} exited (${code ?? sig}):\n${this.tail.slice(-3000)}`));
      });
    });
  }

  async crash(): Promise<void> {
    const c = this.child;
    if (c && this.pid !== undefined) {
      await new Promise<void>((resolve) => {
        c.once('exit', () => resolve());
        c.kill('SIGKILL');
      });
    }
    // A node crash takes its tasks with it: every process working in the node's directory.
    if (this.kind === 'monitor') killPids(processesUnder(this.cwd));
  }

  /** SIGKILL the monitor and its tasks' supervisors (processes of the node running supervisor.js), not the tasks. */
  async crashSupervised(): Promise<void> {
    const c = this.child;
    const supervisors = processesUnder(this.cwd).filter((pid) => {
      try {
        return readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('supervisor.js');
      } catch {
        return false;
      }
    });
    if (c && this.pid !== undefined) {
      await new Promise<void>((resolve) => {
        c.once('exit', () => resolve());
        c.kill('SIGKILL');
        killPids(supervisors);
      });
    } else killPids(supervisors);
  }

  restart(): Promise<void> {
    return this.start();
  }

  pause(): void {
    if (this.pid !== undefined) this.child?.kill('SIGSTOP');
  }

  resume(): void {
    if (this.pid !== undefined) this.child?.kill('SIGCONT');
  }

  partition(): void {
    for (const p of this.proxies) p.partition();
  }

  heal(): void {
    for (const p of this.proxies) p.heal();
  }

  delay(ms: number): void {
    for (const p of this.proxies) p.delay(ms);
  }

  killSync(): void {
    if (this.pid !== undefined) this.child?.kill('SIGKILL');
  }
}

/** Follows the execution-record file; notes when a started run's process is gone without an end line. */
export class RunWatcher {
  /** Run id → pid, for runs with a start line and no end line yet. */
  readonly open = new Map<string, number>();
  /** Run id → Date.now() when its process was first seen gone (no end line at that moment). */
  readonly gone = new Map<string, number>();
  private offset = 0;
  private partial = '';
  private timer: NodeJS.Timeout | undefined;

  constructor(private readonly file: string) {}

  start(everyMs = 100): void {
    this.timer = setInterval(() => this.poll(), everyMs);
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.poll();
  }

  poll(): void {
    if (!existsSync(this.file)) return;
    const fd = openSync(this.file, 'r');
    try {
      const buf = Buffer.alloc(1 << 16);
      for (;;) {
        const n = readSync(fd, buf, 0, buf.length, this.offset);
        if (n <= 0) break;
        this.offset += n;
        this.partial += buf.subarray(0, n).toString();
      }
    } finally {
      closeSync(fd);
    }
    const lines = this.partial.split('\n');
    this.partial = lines.pop() ?? '';
    for (const l of lines) {
      const f = l.split(' ');
      const id = f[7];
      if (!id) continue;
      if (f[0] === 'S') this.open.set(id, Number(f[6]));
      else this.open.delete(id);
    }
    const now = Date.now();
    for (const [id, pid] of this.open) {
      if (!alive(pid)) {
        this.open.delete(id);
        this.gone.set(id, now);
      }
    }
  }
}

export class FaultCell {
  readonly prefix = '/faults/';
  readonly frontEnds: TarcilChild[] = [];
  readonly monitors: TarcilChild[] = [];
  readonly feAddrs: string[] = [];
  readonly proxies: TcpProxy[] = [];
  readonly watcher: RunWatcher;
  private readonly stores: ClusterStore[] = [];
  private stopped = false;
  private readonly onExit = (): void => this.killAllSync();

  private constructor(
    readonly o: CellOptions,
    readonly dir: string,
    readonly etcd: EtcdCluster,
  ) {
    this.watcher = new RunWatcher(this.recordsFile);
    process.on('exit', this.onExit);
  }

  get recordsFile(): string {
    return join(this.dir, 'exec-records.log');
  }
  get taskScript(): string {
    return join(this.dir, 'task.sh');
  }

  static async start(o: CellOptions): Promise<FaultCell> {
    const dir = mkdtempSync(join(tmpdir(), 'tarcil-faults-'));
    const etcd = await EtcdCluster.start();
    const cell = new FaultCell(o, dir, etcd);
    try {
      await cell.boot();
    } catch (err) {
      await cell.stop();
      throw err;
    }
    return cell;
  }

  private async boot(): Promise<void> {
    const o = this.o;
    writeFileSync(this.taskScript, TASK_SCRIPT, { mode: 0o755 });
    writeFileSync(this.recordsFile, '');
    mkdirSync(join(this.dir, 'logs'));
    const proxied = async (): Promise<{ url: string; proxies: TcpProxy[] }> => {
      const proxies = await Promise.all(this.etcd.members.map((m) => tcpProxy(m.clientPort)));
      this.proxies.push(...proxies);
      return { url: this.etcd.storeUrl(proxies.map((p) => p.port)), proxies };
    };
    const ttl = String(o.leaseTtlS);
    for (let i = 0; i < (o.monitors ?? 4); i++) {
      const name = `n${i}`;
      const cwd = join(this.dir, 'nodes', name);
      mkdirSync(cwd, { recursive: true });
      const { url, proxies } = await proxied();
      const args = [
        'monitor',
        '--store',
        url,
        '--prefix',
        this.prefix,
        '--lease-ttl',
        ttl,
        '--node',
        name,
        '--platform',
        'r3-2xlarge',
        '--rus',
        String(o.rus ?? 4),
        '--rack',
        `r${i % 2}`,
        '--executor',
        'process',
        '--log-dir',
        join(cwd, 'logs'),
        ...(o.graceMs !== undefined ? ['--disconnect-grace', `${o.graceMs}ms`] : []),
      ];
      this.monitors.push(new TarcilChild(name, 'monitor', args, cwd, proxies, join(this.dir, 'logs', `${name}.log`)));
    }
    for (let i = 0; i < (o.frontEnds ?? 2); i++) {
      const name = `fe${i}`;
      const { url, proxies } = await proxied();
      // Port 0: the front-end binds a free port itself (one picked here could be taken before it starts).
      const args = ['server', '--store', url, '--prefix', this.prefix, '--lease-ttl', ttl, '--agents', String(o.agents ?? 2), '--port', '0', '--name', name];
      this.frontEnds.push(new TarcilChild(name, 'fe', args, this.dir, proxies, join(this.dir, 'logs', `${name}.log`)));
    }
    // Monitors first, so the front-ends' feasibility checks see the whole cell.
    await Promise.all(this.monitors.map((m) => m.start()));
    await Promise.all(this.frontEnds.map((f) => f.start()));
    this.feAddrs.push(...this.frontEnds.map((f) => `127.0.0.1:${f.port}`));
    this.watcher.start();
  }

  /** A store that reaches every member directly (not through any proxy), for the checker. */
  async store(): Promise<ClusterStore> {
    const s = await openStore(this.etcd.storeUrl());
    this.stores.push(s);
    return s;
  }

  target(): NemesisTarget {
    return {
      etcd: this.etcd,
      ttlMs: this.o.leaseTtlS * 1000,
      ...(this.o.graceMs !== undefined ? { graceMs: this.o.graceMs } : {}),
      frontEnds: this.frontEnds,
      monitors: this.monitors,
      // A run's id starts with its node's name (the task script's `$node:$$:$ns`).
      runningOn: (name) => {
        this.watcher.poll();
        let n = 0;
        for (const id of this.watcher.open.keys()) if (id.startsWith(`${name}:`)) n++;
        return n;
      },
    };
  }

  /** Last lines of every process's output (for a failure message). */
  outputs(lines = 15): string {
    return [...this.frontEnds, ...this.monitors].map((p) => `--- ${p.name}\n${p.output().split('\n').slice(-lines).join('\n')}`).join('\n');
  }

  killAllSync(): void {
    for (const p of [...this.frontEnds, ...this.monitors]) p.killSync();
    if (existsSync(this.dir)) killPids(processesUnder(this.dir));
    this.etcd.killAllSync();
  }

  /** Kills every tarcil process and task, stops etcd; removes the run directory unless keep. */
  async stop(opts: { keep?: boolean } = {}): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    this.watcher.stop();
    for (const p of [...this.frontEnds, ...this.monitors]) p.resume();
    await Promise.all([...this.frontEnds, ...this.monitors].map((p) => p.crash()));
    killPids(processesUnder(this.dir));
    await sleep(100);
    await Promise.all(this.stores.map((s) => s.close().catch(() => undefined)));
    await Promise.all(this.proxies.map((p) => p.close()));
    await this.etcd.stop();
    process.off('exit', this.onExit);
    if (!opts.keep) rmSync(this.dir, { recursive: true, force: true });
  }
}
