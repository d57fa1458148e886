// The columns uPlot draws from the throughput points. A pure function.

/**
 * The columns of a chart from the points, with a null row wherever the points skip more than
 * `gapS` seconds (the front-end was busy or away): uPlot draws no line across a null.
 */
export function columns(pts, fields, gapS = 2.5) {
  const cols = [[], ...fields.map(() => [])];
  let prev;
  for (const p of pts) {
    const t = p.t / 1000;
    if (prev !== undefined && t - prev > gapS) {
      cols[0].push(prev + 1);
      for (let i = 0; i < fields.length; i++) cols[i + 1].push(null);
    }
    cols[0].push(t);
    fields.forEach((f, i) => cols[i + 1].push(p[f] ?? null));
    prev = t;
  }
  return cols;
}
