/**
 * A set of small non-negative integers with O(1) add, delete and uniform random access: the
 * population the agent samples from. Sampling must cost O(R), not O(cluster size), so the members
 * are kept in a dense array with a position index (swap-remove on delete). RU ids are dense, so
 * the position index is a typed array indexed by id (better locality than a Map at 10^5 RUs).
 */
export class IndexedSet {
  private items: number[] = [];
  /** pos[id] = index in items + 1; 0 = absent. */
  private pos: Int32Array = new Int32Array(64);

  get size(): number {
    return this.items.length;
  }
  has(x: number): boolean {
    return x < this.pos.length && (this.pos[x] as number) !== 0;
  }
  add(x: number): boolean {
    if (this.has(x)) return false;
    if (x >= this.pos.length) {
      let n = this.pos.length;
      while (n <= x) n *= 2;
      const grown = new Int32Array(n);
      grown.set(this.pos);
      this.pos = grown;
    }
    this.items.push(x);
    this.pos[x] = this.items.length;
    return true;
  }
  delete(x: number): boolean {
    if (!this.has(x)) return false;
    const p = (this.pos[x] as number) - 1;
    const last = this.items.pop() as number;
    if (p < this.items.length) {
      this.items[p] = last;
      this.pos[last] = p + 1;
    }
    this.pos[x] = 0;
    return true;
  }
  at(i: number): number {
    return this.items[i] as number;
  }
  values(): readonly number[] {
    return this.items;
  }
}
