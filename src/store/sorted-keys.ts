/**
 * The MemoryStore's ordered key index: a list of sorted chunks of at most CHUNK keys, each chunk
 * found by binary search on first keys. Inserting or deleting moves at most one chunk's worth of
 * keys, so seeding 200k keys in any order stays fast, where one flat sorted array would move
 * half the array on every insert. A prefix range is two binary searches and a walk.
 */
import { compareKeys } from './common.ts';

const CHUNK = 512;

export class SortedKeys {
  private chunks: string[][] = [];
  private count = 0;

  get size(): number {
    return this.count;
  }

  /** Adds the key; false if it was already there. */
  insert(key: string): boolean {
    if (this.chunks.length === 0) {
      this.chunks.push([key]);
      this.count = 1;
      return true;
    }
    const ci = this.chunkFor(key);
    const chunk = this.chunks[ci] ?? [];
    const pos = lowerBound(chunk, key);
    if (chunk[pos] === key) return false;
    chunk.splice(pos, 0, key);
    this.count++;
    if (chunk.length > CHUNK) this.chunks.splice(ci + 1, 0, chunk.splice(CHUNK >>> 1));
    return true;
  }

  /** Removes the key; false if it was not there. */
  delete(key: string): boolean {
    if (this.chunks.length === 0) return false;
    const ci = this.chunkFor(key);
    const chunk = this.chunks[ci] ?? [];
    const pos = lowerBound(chunk, key);
    if (chunk[pos] !== key) return false;
    chunk.splice(pos, 1);
    this.count--;
    if (chunk.length === 0) this.chunks.splice(ci, 1);
    return true;
  }

  /** Calls visit on each key >= from, in order, until it returns false. */
  scan(from: string, visit: (key: string) => boolean): void {
    if (this.chunks.length === 0) return;
    const first = this.chunkFor(from);
    let pos = lowerBound(this.chunks[first] ?? [], from);
    for (let ci = first; ci < this.chunks.length; ci++, pos = 0) {
      const chunk = this.chunks[ci] ?? [];
      for (let i = pos; i < chunk.length; i++) {
        const k = chunk[i];
        if (k !== undefined && !visit(k)) return;
      }
    }
  }

  /** How many keys start with prefix. */
  countPrefix(prefix: string): number {
    let n = 0;
    this.scan(prefix, (k) => {
      if (!k.startsWith(prefix)) return false;
      n++;
      return true;
    });
    return n;
  }

  /** The keys starting with prefix, in order. */
  withPrefix(prefix: string, limit = 0): string[] {
    const out: string[] = [];
    this.scan(prefix, (k) => {
      if (!k.startsWith(prefix)) return false;
      out.push(k);
      return limit <= 0 || out.length < limit;
    });
    return out;
  }

  /** The last chunk whose first key is <= key (the first chunk when key precedes them all). */
  private chunkFor(key: string): number {
    let lo = 0;
    let hi = this.chunks.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (compareKeys(this.chunks[mid]?.[0] ?? '', key) <= 0) lo = mid + 1;
      else hi = mid;
    }
    return Math.max(0, lo - 1);
  }
}

function lowerBound(arr: string[], key: string): number {
  let lo = 0;
  let hi = arr.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (compareKeys(arr[mid] ?? '', key) < 0) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}
