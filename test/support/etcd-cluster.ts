/**
 * A 3-member etcd cluster on loopback for fault-injection tests: free ports (new ones when one was
 * taken before its member started), temporary data dirs, auto-compaction off (so a checker can
 * read the whole history from revision 1). A member can be SIGKILLed and restarted on its data dir; the leader is found through etcd's maintenance status
 * (the v3 JSON gateway's /v3/maintenance/status on each member's client URL).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { addressInUse, etcdDataParent, findEtcd, freePorts } from './etcd.ts';

export interface MemberStatus {
  /** This member's id and the leader's id as etcd reports them (0 = no leader known). */
  memberId: string;
  leader: string;
  raftTerm: number;
  revision: number;
}

export interface EtcdMember {
  readonly index: number;
  readonly name: string;
  readonly clientPort: number;
  readonly peerPort: number;
  /** http://127.0.0.1:<clientPort> */
  readonly endpoint: string;
  readonly dataDir: string;
  /** Known once the member has answered a status request. */
  id: string | undefined;
  readonly up: boolean;
  readonly pid: number | undefined;
}

export interface EtcdClusterOptions {
  size?: number;
  bin?: string;
  /** Milliseconds; etcd's defaults are 100 and 1000. */
  heartbeatMs?: number;
  electionMs?: number;
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

class Member implements EtcdMember {
  id: string | undefined;
  child: ChildProcess | undefined;
  stderr = '';
  constructor(
    readonly index: number,
    readonly name: string,
    readonly clientPort: number,
    readonly peerPort: number,
    readonly dataDir: string,
  ) {}
  get endpoint(): string {
    return `http://127.0.0.1:${this.clientPort}`;
  }
  get up(): boolean {
    const c = this.child;
    return c !== undefined && c.exitCode === null && c.signalCode === null;
  }
  get pid(): number | undefined {
    return this.up ? this.child?.pid : undefined;
  }
}

export class EtcdCluster {
  readonly members: readonly EtcdMember[];
  private readonly ms: Member[];
  private stopped = false;

  private constructor(
    private readonly bin: string,
    ms: Member[],
    private readonly args: (m: Member) => string[],
  ) {
    this.ms = ms;
    this.members = ms;
  }

  /**
   * Starts every member and waits until the cluster has a leader that every member knows. The
   * members must know each other's peer URLs before any of them starts, so their ports are picked
   * beforehand, and another process may take one of them first: that member then exits ("address
   * already in use"), and the whole cluster starts again on new ports and data dirs (5 tries).
   */
  static async start(opts: EtcdClusterOptions = {}): Promise<EtcdCluster> {
    const bin = opts.bin ?? findEtcd();
    if (!bin) throw new Error('etcd binary not found (set ETCD_BIN or install etcd-server)');
    const size = opts.size ?? 3;
    for (let attempt = 1; ; attempt++) {
      const cluster = EtcdCluster.create(bin, size, opts, await freePorts(2 * size));
      try {
        await cluster.boot();
        return cluster;
      } catch (err) {
        await cluster.stop();
        if (attempt >= 5 || !addressInUse(err)) throw err;
      }
    }
  }

  private static create(bin: string, size: number, opts: EtcdClusterOptions, ports: readonly number[]): EtcdCluster {
    const ms: Member[] = [];
    for (let i = 0; i < size; i++) {
      ms.push(new Member(i, `m${i}`, ports[2 * i] ?? 0, ports[2 * i + 1] ?? 0, mkdtempSync(join(etcdDataParent(), `tarcil-etcd-m${i}-`))));
    }
    const initial = ms.map((m) => `${m.name}=http://127.0.0.1:${m.peerPort}`).join(',');
    const token = `tarcil-faults-${process.pid}-${Date.now()}`;
    const args = (m: Member): string[] => [
      '--name',
      m.name,
      '--data-dir',
      m.dataDir,
      '--listen-client-urls',
      m.endpoint,
      '--advertise-client-urls',
      m.endpoint,
      '--listen-peer-urls',
      `http://127.0.0.1:${m.peerPort}`,
      '--initial-advertise-peer-urls',
      `http://127.0.0.1:${m.peerPort}`,
      '--initial-cluster',
      initial,
      '--initial-cluster-state',
      'new',
      '--initial-cluster-token',
      token,
      // History must stay readable from revision 1 for the checker.
      '--auto-compaction-mode',
      'revision',
      '--auto-compaction-retention',
      '0',
      '--heartbeat-interval',
      String(opts.heartbeatMs ?? 100),
      '--election-timeout',
      String(opts.electionMs ?? 1000),
      '--log-level',
      'error',
      '--logger',
      'zap',
    ];
    return new EtcdCluster(bin, ms, args);
  }

  /**
   * Launches every member and waits for a leader and every member serving; rejects as soon as a
   * member exits meanwhile (with its stderr: a port taken shows there), rather than at the timeout.
   */
  private async boot(): Promise<void> {
    for (const m of this.ms) this.launch(m);
    let booting = true;
    const exited = new Promise<never>((_resolve, reject) => {
      for (const m of this.ms) {
        // 'close': after the exit and the end of its stderr.
        m.child?.once('close', (code, sig) => {
          if (booting) reject(new Error(`etcd member ${m.name} exited (${code ?? sig}) while the cluster started: ${m.stderr}`));
        });
      }
    });
    const ready = (async (): Promise<void> => {
      await this.waitLeader(30_000);
      for (const m of this.ms) await this.waitServing(m, 20_000);
    })();
    try {
      await Promise.race([exited, ready]);
    } finally {
      booting = false;
    }
  }

  /** etcd://h:p,h:p,h:p for the store URL flag. */
  storeUrl(ports: readonly number[] = this.ms.map((m) => m.clientPort)): string {
    return `etcd://${ports.map((p) => `127.0.0.1:${p}`).join(',')}`;
  }

  private launch(m: Member): void {
    const c = spawn(this.bin, this.args(m), { stdio: ['ignore', 'ignore', 'pipe'] });
    m.child = c;
    m.stderr = '';
    c.stderr?.on('data', (d: Buffer) => {
      m.stderr = (m.stderr + d.toString()).slice(-4000);
    });
  }

  /** SIGKILL: no shutdown, the data dir stays as it was. Resolves once the process is gone. */
  async kill(index: number): Promise<void> {
    const m = this.member(index);
    const c = m.child;
    if (!c || !m.up) return;
    await new Promise<void>((resolve) => {
      c.once('exit', () => resolve());
      c.kill('SIGKILL');
    });
  }

  /** Starts a killed member again on the same ports and data dir; waits until it answers status. */
  async restart(index: number, opts: { wait?: boolean } = {}): Promise<void> {
    const m = this.member(index);
    if (m.up) return;
    this.launch(m);
    if (opts.wait !== false) await this.waitServing(m, 30_000);
  }

  /** This member's view, or undefined when it does not answer within timeoutMs. */
  async status(index: number, timeoutMs = 500): Promise<MemberStatus | undefined> {
    const m = this.member(index);
    if (!m.up) return undefined;
    try {
      const res = await fetch(`${m.endpoint}/v3/maintenance/status`, {
        method: 'POST',
        body: '{}',
        signal: AbortSignal.timeout(timeoutMs),
      });
      if (!res.ok) return undefined;
      const j = (await res.json()) as { header?: { member_id?: string; revision?: string; raft_term?: string }; leader?: string; raftTerm?: string };
      const memberId = j.header?.member_id ?? '';
      if (memberId) m.id = memberId;
      return { memberId, leader: j.leader ?? '0', raftTerm: Number(j.raftTerm ?? j.header?.raft_term ?? 0), revision: Number(j.header?.revision ?? 0) };
    } catch {
      return undefined; // not listening, or no answer in time
    }
  }

  /** Index of the member that a running member reports as leader and that is itself running. */
  async leader(): Promise<number | undefined> {
    const st = await Promise.all(this.ms.map((m) => this.status(m.index)));
    for (const s of st) {
      if (!s || s.leader === '0') continue;
      const idx = this.ms.findIndex((m) => m.id === s.leader);
      if (idx >= 0 && this.ms[idx]?.up) return idx;
    }
    return undefined;
  }

  /**
   * Waits until a majority of the running members report the same leader, which is running and not
   * `notId`; resolves with its index and the time it was seen (Date.now()).
   */
  async waitLeader(timeoutMs: number, notId?: string, pollMs = 50): Promise<{ index: number; at: number }> {
    const deadline = Date.now() + timeoutMs;
    const quorum = Math.floor(this.ms.length / 2) + 1;
    while (Date.now() < deadline && !this.stopped) {
      const st = await Promise.all(this.ms.map((m) => this.status(m.index, 300)));
      const votes = new Map<string, number>();
      for (const s of st) if (s && s.leader !== '0' && s.leader !== notId) votes.set(s.leader, (votes.get(s.leader) ?? 0) + 1);
      for (const [id, n] of votes) {
        const idx = this.ms.findIndex((m) => m.id === id);
        if (n >= quorum && idx >= 0 && this.ms[idx]?.up) return { index: idx, at: Date.now() };
      }
      await sleep(pollMs);
    }
    throw new Error(`no etcd leader within ${timeoutMs} ms: ${this.ms.map((m) => `${m.name} ${m.up ? 'up' : 'down'} ${m.stderr.slice(-300)}`).join(' | ')}`);
  }

  private async waitServing(m: Member, timeoutMs: number): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (Date.now() < deadline) {
      if (!m.up) throw new Error(`etcd member ${m.name} exited: ${m.stderr}`);
      if (await this.status(m.index, 300)) return;
      await sleep(50);
    }
    throw new Error(`etcd member ${m.name} does not answer at ${m.endpoint}: ${m.stderr}`);
  }

  private member(index: number): Member {
    const m = this.ms[index];
    if (!m) throw new Error(`no etcd member ${index}`);
    return m;
  }

  /** Kills every member at once, synchronously (for exit handlers). Data dirs stay. */
  killAllSync(): void {
    for (const m of this.ms) if (m.up) m.child?.kill('SIGKILL');
  }

  /** Stops every member and removes the data dirs. */
  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    await Promise.all(this.ms.map((m) => this.kill(m.index)));
    for (const m of this.ms) rmSync(m.dataDir, { recursive: true, force: true });
  }
}
