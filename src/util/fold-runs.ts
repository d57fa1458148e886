/**
 * Consecutive equal items as one, with how many there were: a waiting job's sixty identical sample
 * attempts read "R=32, f=0.000, 0 candidates ×60" (`explain`, the dashboard).
 */
export function foldRuns<T>(items: readonly T[], key: (x: T) => string): { item: T; count: number; first: number }[] {
  const out: { item: T; count: number; first: number; k: string }[] = [];
  items.forEach((item, i) => {
    const k = key(item);
    const last = out[out.length - 1];
    if (last && last.k === k) last.count++;
    else out.push({ item, count: 1, first: i, k });
  });
  return out.map(({ item, count, first }) => ({ item, count, first }));
}
