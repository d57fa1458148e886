/**
 * SVG charts through vega (hand-written specs, rendered server-side with View.toSVG(): no
 * browser, no canvas). One spec shape covers every figure here: series of (x, y) points drawn as
 * lines with markers, x linear, log or categorical.
 */
import { parse, View } from 'vega';

export interface Point {
  x: number | string;
  y: number;
  series: string;
}

export interface ChartSpec {
  file: string;
  title: string;
  xTitle: string;
  yTitle: string;
  points: Point[];
  logX?: boolean;
  logY?: boolean;
  /** Draw markers only (categorical comparisons). */
  pointsOnly?: boolean;
}

export function vegaSpec(c: ChartSpec): Record<string, unknown> {
  const categorical = c.points.some((p) => typeof p.x === 'string');
  const values = c.points.filter((p) => Number.isFinite(p.y) && (!c.logY || p.y > 0) && (typeof p.x === 'string' || !c.logX || p.x > 0));
  const enc = { x: { scale: 'x', field: 'x' }, y: { scale: 'y', field: 'y' } };
  const marks: Record<string, unknown>[] = [];
  if (!c.pointsOnly) {
    marks.push({
      type: 'line',
      from: { data: 'series' },
      encode: { enter: { ...enc, stroke: { scale: 'color', field: 'series' }, strokeWidth: { value: 2 } } },
    });
  }
  marks.push({
    type: 'symbol',
    from: { data: 'series' },
    encode: { enter: { ...enc, fill: { scale: 'color', field: 'series' }, size: { value: c.pointsOnly ? 50 : 18 } } },
  });
  return {
    $schema: 'https://vega.github.io/schema/vega/v5.json',
    width: 560,
    height: 320,
    padding: 8,
    background: 'white',
    title: { text: c.title, fontSize: 13 },
    data: [{ name: 'table', values }],
    scales: [
      categorical
        ? { name: 'x', type: 'point', range: 'width', padding: 0.5, domain: { data: 'table', field: 'x' } }
        : { name: 'x', type: c.logX ? 'log' : 'linear', range: 'width', nice: !c.logX, zero: false, domain: { data: 'table', field: 'x' } },
      { name: 'y', type: c.logY ? 'log' : 'linear', range: 'height', nice: true, zero: !c.logY, domain: { data: 'table', field: 'y' } },
      { name: 'color', type: 'ordinal', range: 'category', domain: { data: 'table', field: 'series' } },
    ],
    axes: [
      { orient: 'bottom', scale: 'x', title: c.xTitle, grid: !categorical },
      { orient: 'left', scale: 'y', title: c.yTitle, grid: true },
    ],
    legends: [{ fill: 'color', orient: 'right' }],
    marks: [{ type: 'group', from: { facet: { name: 'series', data: 'table', groupby: 'series' } }, marks }],
  };
}

export async function renderSvg(c: ChartSpec): Promise<string> {
  const view = new View(parse(vegaSpec(c)), { renderer: 'none' });
  try {
    return await view.toSVG();
  } finally {
    view.finalize();
  }
}
