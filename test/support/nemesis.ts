/**
 * A seeded nemesis for fault-injection runs (in the spirit of Jepsen's and etcd's robustness
 * tests): on a random schedule it kills the etcd leader, a follower or two members at once (quorum
 * loss) and restarts them on their data dirs; SIGSTOPs a front-end or a monitor past its lease TTL
 * and SIGCONTs it; cuts or delays a process's etcd connections through its TCP fault proxies; and
 * SIGKILLs a front-end or a node and restarts it; freezes a monitor (SIGSTOP) for less than,
 * about and much more than its lease TTL + disconnect grace; SIGKILLs a monitor and its tasks'
 * supervisors but not the tasks (which must die with them); SIGKILLs a front-end in the middle of a
 * quorum loss and starts it again once etcd has a majority again (clients that keep trying it
 * must get their submissions in). Faults run one after another; each is logged
 * with the time it began, the time it was repaired and, for etcd faults, how long etcd itself
 * took to have a leader again. The same seed gives the same plan.
 */
import type { Rng } from '../../src/util/rng.ts';
import type { EtcdCluster } from './etcd-cluster.ts';

export const FAULT_KINDS = [
  'leader-kill',
  'follower-kill',
  'quorum-loss',
  'fe-stop',
  'monitor-stop',
  'fe-partition',
  'monitor-partition',
  'fe-delay',
  'monitor-delay',
  'fe-kill',
  'monitor-kill',
  'monitor-freeze-short',
  'monitor-freeze-edge',
  'monitor-freeze-long',
  'monitor-supervisor-kill',
  'quorum-loss-fe-kill',
] as const;
export type FaultKind = (typeof FAULT_KINDS)[number];

/** A tarcil process the nemesis may act on. */
export interface NemesisProc {
  readonly name: string;
  /** SIGKILL; for a monitor also every task process of its node (the node crashed). */
  crash(): Promise<void>;
  /** A monitor: SIGKILL it and its tasks' supervisors, not the tasks (they must die with their supervisors). */
  crashSupervised?(): Promise<void>;
  /** Starts it again as it was started (same flags, same node); resolves when it serves. */
  restart(): Promise<void>;
  pause(): void;
  resume(): void;
  /** Its connections to etcd: cut (held back) / healed, or delayed by ms (0: none). */
  partition(): void;
  heal(): void;
  delay(ms: number): void;
}

export interface NemesisTarget {
  etcd: EtcdCluster;
  /** Lease TTL of the tarcil processes, ms: SIGSTOPs last longer than this. */
  ttlMs: number;
  /** The monitors' disconnect grace, ms: the monitor freezes are measured against TTL + grace. */
  graceMs?: number;
  frontEnds: readonly NemesisProc[];
  monitors: readonly NemesisProc[];
  /**
   * How many tasks run on a monitor's node now, from the tasks' own records. When given, a
   * freeze picks among the monitors running the most, so that it has tasks to place elsewhere.
   */
  runningOn?: (monitor: string) => number;
}

export interface PlannedFault {
  kind: FaultKind;
  /** Quiet time before this fault begins. */
  gapMs: number;
  /** How long the fault lasts before it is repaired. */
  durationMs: number;
  /** Delay of a *-delay fault, ms. */
  delayMs?: number;
  /** Draws for the choice of target, resolved when the fault begins (the leader is found then). */
  pick: number;
  pick2: number;
}

export interface FaultRecord {
  kind: FaultKind;
  target: string;
  /** Date.now() when the fault was injected. */
  start: number;
  /** Date.now() when it was repaired (member restarted, SIGCONT, healed, process started again). */
  healed: number;
  /** etcd faults: time from the kill (quorum loss: from the restart) until a majority reports a leader. */
  electionMs?: number;
  detail?: string;
  error?: string;
}

export interface PlanOptions {
  /** Fault kinds in order; omitted: drawn at random from `kinds`. */
  sequence?: readonly FaultKind[];
  kinds?: readonly FaultKind[];
  /** With no sequence: plan faults until their gaps and durations add up to this. */
  budgetMs?: number;
  /** First gap (the cell warms up), ms. */
  firstGapMs?: number;
  gapMs?: [number, number];
  /** Down time of killed etcd members. */
  memberDownMs?: [number, number];
  quorumDownMs?: [number, number];
}

const between = (rng: Rng, [lo, hi]: [number, number]): number => Math.round(lo + rng.next() * (hi - lo));
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, Math.max(0, ms)));

/** The faults of one run, drawn from the seed: kinds, gaps, durations and targets. */
export function planFaults(rng: Rng, ttlMs: number, o: PlanOptions = {}, graceMs = 60_000): PlannedFault[] {
  // A monitor's tasks are placed elsewhere once TTL + grace + a margin have passed since it was last heard.
  const fence = ttlMs + graceMs;
  const gap = o.gapMs ?? [4000, 8000];
  const kinds = o.kinds ?? FAULT_KINDS;
  const out: PlannedFault[] = [];
  let used = 0;
  for (let i = 0; ; i++) {
    if (o.sequence && i >= o.sequence.length) break;
    const kind = o.sequence ? (o.sequence[i] as FaultKind) : (kinds[rng.int(kinds.length)] as FaultKind);
    const gapMs = i === 0 && o.firstGapMs !== undefined ? o.firstGapMs : between(rng, gap);
    let durationMs: number;
    let delayMs: number | undefined;
    switch (kind) {
      case 'leader-kill':
      case 'follower-kill':
        durationMs = between(rng, o.memberDownMs ?? [2000, 5000]);
        break;
      case 'quorum-loss':
      case 'quorum-loss-fe-kill':
        durationMs = between(rng, o.quorumDownMs ?? [4000, 10_000]);
        break;
      case 'fe-stop':
      case 'monitor-stop':
        durationMs = ttlMs + between(rng, [1000, 4000]);
        break;
      case 'fe-partition':
      case 'monitor-partition':
        durationMs = between(rng, [1000, ttlMs + 3000]);
        break;
      case 'fe-delay':
      case 'monitor-delay':
        durationMs = between(rng, [3000, 8000]);
        delayMs = between(rng, [100, 1500]);
        break;
      case 'fe-kill':
      case 'monitor-kill':
      case 'monitor-supervisor-kill':
        durationMs = between(rng, [500, 3000]);
        break;
      case 'monitor-freeze-short':
        // Less than TTL + grace: the node is back before its deadline.
        durationMs = between(rng, [Math.round(fence * 0.5), Math.round(fence * 0.85)]);
        break;
      case 'monitor-freeze-edge':
        // About TTL + grace: its supervisors stop its tasks about as it comes back.
        durationMs = between(rng, [fence - 500, fence + 1000]);
        break;
      case 'monitor-freeze-long':
        // Much longer: its tasks are placed elsewhere while it is frozen.
        durationMs = 2 * fence + between(rng, [0, 2000]);
        break;
    }
    const f: PlannedFault = { kind, gapMs, durationMs, pick: rng.next(), pick2: rng.next() };
    if (delayMs !== undefined) f.delayMs = delayMs;
    if (!o.sequence && o.budgetMs !== undefined && used + gapMs + durationMs > o.budgetMs) break;
    used += gapMs + durationMs;
    out.push(f);
  }
  return out;
}

export class Nemesis {
  readonly log: FaultRecord[] = [];
  private stopped = false;

  constructor(
    private readonly t: NemesisTarget,
    private readonly say: (line: string) => void = () => undefined,
  ) {}

  /** Asks run() to stop after the fault in progress is repaired. */
  stop(): void {
    this.stopped = true;
  }

  /** Runs the plan, one fault after another; every fault is repaired before run() resolves. */
  async run(plan: readonly PlannedFault[]): Promise<FaultRecord[]> {
    for (const f of plan) {
      await sleep(f.gapMs);
      if (this.stopped) break;
      const rec = await this.inject(f);
      this.log.push(rec);
      this.say(
        `[nemesis] ${rec.kind} ${rec.target} at ${new Date(rec.start).toISOString().slice(11, 23)}: ${rec.healed - rec.start} ms` +
          `${rec.electionMs !== undefined ? `, etcd leader after ${rec.electionMs} ms` : ''}${rec.detail ? ` (${rec.detail})` : ''}${rec.error ? ` ERROR ${rec.error}` : ''}`,
      );
    }
    return this.log;
  }

  private async inject(f: PlannedFault): Promise<FaultRecord> {
    const etcd = this.t.etcd;
    const rec: FaultRecord = { kind: f.kind, target: '', start: Date.now(), healed: 0 };
    const pickProc = (all: readonly NemesisProc[]): NemesisProc => {
      let list = all;
      const running = this.t.runningOn;
      if (running && f.kind.startsWith('monitor-freeze')) {
        const load = new Map(all.map((p) => [p, running(p.name)]));
        const most = Math.max(...load.values());
        if (most > 0) list = all.filter((p) => load.get(p) === most);
        rec.detail = `${most} task(s) running there`;
      }
      const p = list[Math.floor(f.pick * list.length)];
      if (!p) throw new Error(`no process to act on for ${f.kind}`);
      rec.target = p.name;
      return p;
    };
    try {
      switch (f.kind) {
        case 'leader-kill': {
          const leader = await this.currentLeader();
          const id = etcd.members[leader]?.id;
          rec.target = etcd.members[leader]?.name ?? String(leader);
          rec.start = Date.now();
          await etcd.kill(leader);
          const elected = await etcd.waitLeader(30_000, id);
          rec.electionMs = elected.at - rec.start;
          rec.detail = `new leader ${etcd.members[elected.index]?.name}`;
          await sleep(rec.start + f.durationMs - Date.now());
          await etcd.restart(leader);
          rec.healed = Date.now();
          break;
        }
        case 'follower-kill': {
          const leader = await this.currentLeader();
          const followers = etcd.members.filter((m) => m.index !== leader);
          const m = followers[Math.floor(f.pick * followers.length)];
          if (!m) throw new Error('no follower');
          rec.target = m.name;
          rec.start = Date.now();
          await etcd.kill(m.index);
          await sleep(f.durationMs);
          const after = await etcd.leader();
          rec.detail = after === leader ? 'leader unchanged' : `leader now ${after === undefined ? 'unknown' : etcd.members[after]?.name}`;
          await etcd.restart(m.index);
          rec.healed = Date.now();
          break;
        }
        case 'quorum-loss':
        case 'quorum-loss-fe-kill': {
          const a = Math.floor(f.pick * etcd.members.length);
          const others = etcd.members.filter((m) => m.index !== a);
          const b = others[Math.floor(f.pick2 * others.length)]?.index ?? (a + 1) % etcd.members.length;
          const leader = await etcd.leader();
          // The front-end killed a third of the way into the quorum loss (the same draw picks it).
          const fe = f.kind === 'quorum-loss-fe-kill' ? this.t.frontEnds[Math.floor(f.pick2 * this.t.frontEnds.length)] : undefined;
          if (f.kind === 'quorum-loss-fe-kill' && !fe) throw new Error('no front-end to kill');
          rec.target = `${etcd.members[a]?.name}+${etcd.members[b]?.name}${fe ? `, ${fe.name}` : ''}`;
          rec.detail = leader === a || leader === b ? 'leader among them' : 'leader survived alone';
          rec.start = Date.now();
          await Promise.all([etcd.kill(a), etcd.kill(b)]);
          if (fe) {
            await sleep(f.durationMs / 3);
            await fe.crash();
            await sleep(rec.start + f.durationMs - Date.now());
          } else await sleep(f.durationMs);
          await Promise.all([etcd.restart(a, { wait: false }), etcd.restart(b, { wait: false })]);
          rec.healed = Date.now();
          const elected = await etcd.waitLeader(60_000);
          rec.electionMs = elected.at - rec.healed;
          if (fe) {
            // Started again once etcd has a leader; repaired when it says it listens.
            const restarted = rec.healed;
            await fe.restart();
            rec.healed = Date.now();
            rec.detail += `; ${fe.name} listening again ${rec.healed - restarted} ms after the members' restart`;
          }
          break;
        }
        case 'fe-stop':
        case 'monitor-stop':
        case 'monitor-freeze-short':
        case 'monitor-freeze-edge':
        case 'monitor-freeze-long': {
          const p = pickProc(f.kind === 'fe-stop' ? this.t.frontEnds : this.t.monitors);
          rec.start = Date.now();
          p.pause();
          await sleep(f.durationMs);
          p.resume();
          rec.healed = Date.now();
          break;
        }
        case 'fe-partition':
        case 'monitor-partition': {
          const p = pickProc(f.kind === 'fe-partition' ? this.t.frontEnds : this.t.monitors);
          rec.start = Date.now();
          p.partition();
          await sleep(f.durationMs);
          p.heal();
          rec.healed = Date.now();
          break;
        }
        case 'fe-delay':
        case 'monitor-delay': {
          const p = pickProc(f.kind === 'fe-delay' ? this.t.frontEnds : this.t.monitors);
          rec.detail = `${f.delayMs ?? 0} ms each way`;
          rec.start = Date.now();
          p.delay(f.delayMs ?? 0);
          await sleep(f.durationMs);
          p.delay(0);
          rec.healed = Date.now();
          break;
        }
        case 'monitor-supervisor-kill': {
          const p = pickProc(this.t.monitors);
          if (!p.crashSupervised) throw new Error(`${p.name} cannot be crashed without its tasks`);
          rec.start = Date.now();
          await p.crashSupervised();
          await sleep(f.durationMs);
          await p.restart();
          rec.healed = Date.now();
          break;
        }
        case 'fe-kill':
        case 'monitor-kill': {
          const p = pickProc(f.kind === 'fe-kill' ? this.t.frontEnds : this.t.monitors);
          rec.start = Date.now();
          await p.crash();
          await sleep(f.durationMs);
          await p.restart();
          rec.healed = Date.now();
          break;
        }
      }
    } catch (err) {
      rec.error = (err as Error).message.slice(0, 300);
      rec.healed = Date.now();
      await this.repairAll();
    }
    return rec;
  }

  private async currentLeader(): Promise<number> {
    return (await this.t.etcd.waitLeader(30_000)).index;
  }

  /** After a fault that went wrong: every member running, every process resumed and healed. */
  private async repairAll(): Promise<void> {
    for (const p of [...this.t.frontEnds, ...this.t.monitors]) {
      p.resume();
      p.heal();
      p.delay(0);
    }
    for (const m of this.t.etcd.members) if (!m.up) await this.t.etcd.restart(m.index, { wait: false }).catch(() => undefined);
  }
}
