/**
 * The node monitor's outcome journal: a small local log of task outcomes (a task's process
 * exited, the monitor killed it) written the moment they happen and flushed to disk before the
 * monitor does anything else with them, so that an outcome survives a store that does not answer
 * and a restart of the monitor. An entry stays until the store has the outcome (or has moved on
 * from that attempt), then it is removed and the file compacted. `FileJournal` keeps one
 * append-only JSON-lines file per node; `MemoryJournal` keeps entries for the life of the process
 * only (embedded monitors and tests that give no directory).
 */
import { createHash } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import { open, readFile, rename, type FileHandle } from 'node:fs/promises';
import { join } from 'node:path';
import type { PlacedRuRecord } from '../state/records.ts';
import type { TaskOutcome } from '../state/release.ts';

/** One attempt's outcome, with what the monitor needs to write it to the store later. */
export interface OutcomeEntry extends TaskOutcome {
  job: string;
  task: number;
  commitId: string;
  attempt: number;
  ruIndex: number;
  /** Revision of the RU record that placed this attempt (the task record's `placedRevision`). */
  placedRevision: number;
  /** The RU record's revision when the attempt ended, if known: the fence tried first. */
  ruRev?: number;
  /** The RU record of the placement. */
  rec: PlacedRuRecord;
  startedAt: number;
  logPath?: string;
  /** A load report was written for the task (removed with the outcome). */
  reported?: boolean;
  /** What the run tells the profile learner (state/profiles.ts), recorded with the outcome. */
  observed?: { share: number; pressure: number[]; ms: number };
}

/** The entry for an attempt that ended with `outcome`. */
export function outcomeEntry(
  run: {
    job: string;
    task: number;
    commitId: string;
    ruIndex: number;
    rec: PlacedRuRecord;
    placedRevision: number;
    startedAt: number;
    rev?: number;
    handle?: { logPath?: string } | undefined;
    reported?: boolean;
  },
  outcome: TaskOutcome,
): OutcomeEntry {
  return {
    job: run.job,
    task: run.task,
    commitId: run.commitId,
    attempt: run.rec.attempt,
    ruIndex: run.ruIndex,
    placedRevision: run.placedRevision,
    ...(run.rev !== undefined ? { ruRev: run.rev } : {}),
    rec: run.rec,
    startedAt: run.startedAt,
    ...outcome,
    ...(run.handle?.logPath ? { logPath: run.handle.logPath } : {}),
    ...(run.reported ? { reported: true } : {}),
  };
}

/** Identifies one attempt of one task on this node. */
export function entryKey(e: { job: string; task: number; commitId: string }): string {
  return `${e.job}#${e.task}@${e.commitId}`;
}

export interface OutcomeJournal {
  /** Where it is kept: a file path, or 'memory'. */
  readonly location: string;
  /** Reads what an earlier run of the monitor left (call once, before anything else). */
  load(): Promise<OutcomeEntry[]>;
  /** Records an outcome: visible to has()/entries() at once, durable when the promise resolves. */
  append(e: OutcomeEntry): Promise<void>;
  /** The store has the outcome (or has moved on): forget it. */
  remove(key: string): Promise<void>;
  has(key: string): boolean;
  get(key: string): OutcomeEntry | undefined;
  entries(): OutcomeEntry[];
  close(): Promise<void>;
}

/** Entries for the life of the process. */
export class MemoryJournal implements OutcomeJournal {
  readonly location = 'memory';
  private readonly map = new Map<string, OutcomeEntry>();
  load(): Promise<OutcomeEntry[]> {
    return Promise.resolve(this.entries());
  }
  append(e: OutcomeEntry): Promise<void> {
    this.map.set(entryKey(e), e);
    return Promise.resolve();
  }
  remove(key: string): Promise<void> {
    this.map.delete(key);
    return Promise.resolve();
  }
  has(key: string): boolean {
    return this.map.has(key);
  }
  get(key: string): OutcomeEntry | undefined {
    return this.map.get(key);
  }
  entries(): OutcomeEntry[] {
    return [...this.map.values()];
  }
  close(): Promise<void> {
    return Promise.resolve();
  }
}

type Line = { op: 'add'; e: OutcomeEntry } | { op: 'done'; key: string };

/**
 * An append-only JSON-lines file, `outcomes-<server>-<hash of the key prefix>.jsonl` in `dir`:
 * an `add` line per outcome (fsync'd before append() resolves), a `done` line per removal. It is
 * rewritten with only the live entries when it is loaded and once removals pile up, and truncated
 * when nothing is left. A torn last line (a crash mid-write) is skipped when read.
 */
export class FileJournal implements OutcomeJournal {
  readonly location: string;
  private readonly map = new Map<string, OutcomeEntry>();
  private handle: FileHandle | undefined;
  private chain: Promise<void> = Promise.resolve();
  private done = 0;
  private closed = false;

  constructor(dir: string, server: string, prefix: string) {
    mkdirSync(dir, { recursive: true });
    const safe = server.replace(/[^A-Za-z0-9._-]/g, '_');
    const hash = createHash('sha256').update(prefix).digest('hex').slice(0, 8);
    this.location = join(dir, `outcomes-${safe}-${hash}.jsonl`);
  }

  async load(): Promise<OutcomeEntry[]> {
    let text = '';
    try {
      text = await readFile(this.location, 'utf8');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
    }
    for (const raw of text.split('\n')) {
      if (raw.trim() === '') continue;
      let line: Line;
      try {
        line = JSON.parse(raw) as Line;
      } catch {
        continue; // a torn write
      }
      if (line.op === 'add' && line.e && typeof line.e.job === 'string') this.map.set(entryKey(line.e), line.e);
      else if (line.op === 'done') this.map.delete(line.key);
    }
    await this.rewrite();
    return this.entries();
  }

  append(e: OutcomeEntry): Promise<void> {
    this.map.set(entryKey(e), e);
    return this.enqueue(async (h) => {
      await h.appendFile(`${JSON.stringify({ op: 'add', e } satisfies Line)}\n`);
      await h.sync();
    });
  }

  remove(key: string): Promise<void> {
    if (!this.map.delete(key)) return this.chain;
    this.done++;
    if (this.map.size === 0) {
      this.done = 0;
      return this.enqueue(async (h) => {
        await h.truncate(0);
        await h.sync();
      });
    }
    if (this.done > 64 && this.done > this.map.size) {
      this.done = 0;
      return this.enqueue(() => this.rewrite());
    }
    // Losing a removal costs one more look at the store after a restart, never an outcome.
    return this.enqueue((h) => h.appendFile(`${JSON.stringify({ op: 'done', key } satisfies Line)}\n`));
  }

  has(key: string): boolean {
    return this.map.has(key);
  }
  get(key: string): OutcomeEntry | undefined {
    return this.map.get(key);
  }
  entries(): OutcomeEntry[] {
    return [...this.map.values()];
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.chain.catch(() => undefined);
    await this.handle?.close();
    this.handle = undefined;
  }

  /** Writes run one at a time, in order; a failed write fails its caller, not the next one. */
  private enqueue(fn: (h: FileHandle) => Promise<void>): Promise<void> {
    const next = this.chain.then(async () => {
      if (this.closed) throw new Error(`outcome journal ${this.location} is closed`);
      this.handle ??= await open(this.location, 'a');
      await fn(this.handle);
    });
    this.chain = next.catch(() => undefined);
    return next;
  }

  /** The live entries only, through a temporary file renamed over the journal. */
  private async rewrite(): Promise<void> {
    const tmp = `${this.location}.tmp`;
    const h = await open(tmp, 'w');
    try {
      const body = this.entries()
        .map((e) => `${JSON.stringify({ op: 'add', e } satisfies Line)}\n`)
        .join('');
      if (body) await h.writeFile(body);
      await h.sync();
    } finally {
      await h.close();
    }
    await this.handle?.close();
    this.handle = undefined;
    await rename(tmp, this.location);
    // The rename itself is durable once the directory is synced.
    const dir = await open(join(this.location, '..'), 'r');
    try {
      await dir.sync();
    } finally {
      await dir.close();
    }
  }
}
