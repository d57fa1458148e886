/**
 * The counters behind admission control (state.ts): an LSH bucket's free and total RUs, its
 * contention sums, its history of frees, and the merge of several buckets' histories.
 */

/** A sorted ring of timestamps with a size cap and a time window. */
export class FreeHistory {
  private readonly buf: Float64Array;
  private head = 0; // index of the oldest
  private len = 0;
  /** Bumped by every change (a push, a prune that removed something). */
  version = 0;

  constructor(cap: number) {
    this.buf = new Float64Array(cap);
  }
  push(t: number): void {
    this.version++;
    const cap = this.buf.length;
    if (this.len === cap) {
      this.head = (this.head + 1) % cap;
      this.len--;
    }
    // Clocks that step back (wall time) would break the sorted order the merge relies on.
    const last = this.len > 0 ? (this.buf[(this.head + this.len - 1) % cap] as number) : -Infinity;
    this.buf[(this.head + this.len) % cap] = t < last ? last : t;
    this.len++;
  }
  prune(before: number): void {
    const cap = this.buf.length;
    while (this.len > 0 && (this.buf[this.head] as number) < before) {
      this.head = (this.head + 1) % cap;
      this.len--;
      this.version++;
    }
  }
  get length(): number {
    return this.len;
  }
  /** Copies the timestamps, oldest first, into `out` from `at`; returns the index after the last. */
  copyTo(out: Float64Array, at: number): number {
    const cap = this.buf.length;
    const first = Math.min(this.len, cap - this.head);
    out.set(this.buf.subarray(this.head, this.head + first), at);
    if (first < this.len) out.set(this.buf.subarray(0, this.len - first), at + first);
    return at + this.len;
  }
}

/** The inter-free statistics of a set of buckets' merged history (see waitEstimate). */
export interface MergedStats {
  /** The histories' version they were computed at. */
  version: number;
  samples: number;
  mu: number;
  sigma: number;
}

/** One LSH bucket's counters: free and total RUs, contention sums, and its history of frees. */
export class Bucket {
  free = 0;
  total = 0;
  /** Σ over free RUs of the fixed-point contention (exact integers in doubles). */
  readonly sumFree: Float64Array;
  /** Σ over all RUs, for the representative vector of a bucket with nothing free. */
  readonly sumAll: Float64Array;
  /**
   * For a bucket that has emptied: its mean just before (of its free RUs if any was free, else of
   * all). Written only when the last RU leaves; a bucket with RUs computes its mean from the sums.
   */
  readonly lastMean: Float64Array;
  seen = false;
  readonly history: FreeHistory;

  constructor(n: number, historyMax: number) {
    this.sumFree = new Float64Array(n);
    this.sumAll = new Float64Array(n);
    this.lastMean = new Float64Array(n);
    this.history = new FreeHistory(historyMax);
  }
}

/**
 * Merges the sorted runs a[bounds[r], bounds[r+1]) two by two until one is left, going back and
 * forth between a and b; returns the array holding the sorted result, then the other one.
 */
export function mergeRuns(a: Float64Array, b: Float64Array, bounds: number[]): [Float64Array, Float64Array] {
  let src = a;
  let dst = b;
  let runs = bounds;
  while (runs.length > 2) {
    const next = [0];
    for (let r = 0; r + 1 < runs.length; r += 2) {
      const lo = runs[r] as number;
      const mid = runs[r + 1] as number;
      const hi = r + 2 < runs.length ? (runs[r + 2] as number) : mid;
      let i = lo;
      let j = mid;
      let k = lo;
      while (i < mid && j < hi) dst[k++] = (src[i] as number) <= (src[j] as number) ? (src[i++] as number) : (src[j++] as number);
      while (i < mid) dst[k++] = src[i++] as number;
      while (j < hi) dst[k++] = src[j++] as number;
      next.push(hi);
    }
    const t = src;
    src = dst;
    dst = t;
    runs = next;
  }
  return [src, dst];
}
