/**
 * The requests a process sends etcd, counted by kind (read, write) and by the kinds of record they
 * touch: the union of the labels of every key a request compares, reads or writes (a placement is
 * `write rus+tasks+…`). What each part of the scheduler costs the store in messages, which is what
 * a task's CPU follows (bench/README, ceiling). Off until a label function is given (the metrics
 * endpoint gives one); then each request costs a label per key.
 */

/** Distinct (kind, records) pairs counted before the rest go to `other`. */
const MAX_LABELS = 64;

export class RequestCounts {
  private label: ((key: string) => string) | undefined;
  private readonly counts = new Map<string, number>();

  /** Starts counting with `label` (a key's record kind); returns a reader of the counts by `kind|records`. */
  enable(label: (key: string) => string): () => ReadonlyMap<string, number> {
    this.label = label;
    return () => this.counts;
  }

  /** One request of `kind` touching `keys` (nothing while counting is off). */
  count(kind: 'read' | 'write', keys: Iterable<string>): void {
    const label = this.label;
    if (!label) return;
    const kinds: string[] = [];
    for (const k of keys) {
      const l = label(k);
      if (!kinds.includes(l)) kinds.push(l);
    }
    let key = `${kind}|${kinds.sort().join('+')}`;
    if (!this.counts.has(key) && this.counts.size >= MAX_LABELS) key = `${kind}|other`;
    this.counts.set(key, (this.counts.get(key) ?? 0) + 1);
  }

  /** Whether requests are counted (the callers skip gathering keys otherwise). */
  get on(): boolean {
    return this.label !== undefined;
  }
}
