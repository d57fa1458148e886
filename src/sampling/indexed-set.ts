/**
 * A set of small non-negative integers with O(1) add, delete and uniform random access: the
 * population the agent samples from. Sampling must cost O(R), not O(cluster size), so the free
 * RUs are kept in a dense array with a position index (swap-remove on delete).
 */
export class IndexedSet {
  private items: number[] = [];
  private pos = new Map<number, number>();

  get size(): number {
    return this.items.length;
  }
  has(x: number): boolean {
    return this.pos.has(x);
  }
  add(x: number): boolean {
    if (this.pos.has(x)) return false;
    this.pos.set(x, this.items.length);
    this.items.push(x);
    return true;
  }
  delete(x: number): boolean {
    const p = this.pos.get(x);
    if (p === undefined) return false;
    const last = this.items.pop() as number;
    if (p < this.items.length) {
      this.items[p] = last;
      this.pos.set(last, p);
    }
    this.pos.delete(x);
    return true;
  }
  at(i: number): number {
    return this.items[i] as number;
  }
  values(): readonly number[] {
    return this.items;
  }
}
