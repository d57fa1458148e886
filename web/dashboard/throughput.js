// Throughput and latency of the last minutes (a point a second), drawn with uPlot: a second
// with no point, or a point with no value (no placement in the window), is drawn as a gap
// (series.js).
import { h } from 'preact';
import { useEffect, useRef } from 'preact/hooks';
import htm from 'htm';
import uPlot from 'uplot';
import { useLive } from './live.js';
import { ms } from './format.js';
import { columns } from './series.js';

const html = htm.bind(h);

function Chart({ title, series, data, testid }) {
  const el = useRef(null);
  const plot = useRef(null);
  useEffect(() => {
    const width = Math.max(300, (el.current?.clientWidth ?? 600) - 10);
    plot.current = new uPlot(
      {
        title,
        width,
        height: 220,
        series: [{}, ...series.map(([label, stroke]) => ({ label, stroke, width: 2, spanGaps: false, points: { show: false } }))],
        axes: [{}, { size: 60 }],
        scales: { x: { time: true } },
      },
      data,
      el.current,
    );
    return () => plot.current?.destroy();
  }, []);
  useEffect(() => plot.current?.setData(data), [data]);
  return html`<div class="chart" data-testid=${testid} ref=${el}></div>`;
}

export function ThroughputPage() {
  const l = useLive();
  const pts = l.throughput;
  const last = pts[pts.length - 1];
  const gaps = columns(pts, ['p50'])[1].filter((x) => x === null).length;
  return html`<section data-testid="page-throughput">
    <h2>Throughput and latency</h2>
    <div class="stats">
      <div class="stat"><b data-testid="placements-total">${last ? last.placedTotal : 0}</b><span>tasks placed since the front-end started</span></div>
      <div class="stat"><b>${last ? last.placements : 0}</b><span>placements/s now</span></div>
      <div class="stat"><b>${ms(last?.p50)}</b><span>submit → placed p50 (10 s)</span></div>
      <div class="stat"><b>${ms(last?.p99)}</b><span>p99</span></div>
      <div class="stat"><b>${last ? last.conflictsTotal : 0}</b><span>commit conflicts since it started</span></div>
    </div>
    <${Chart} testid="chart-rate" title="per second" series=${[
      ['placements/s', '#2a9d4a'],
      ['decisions/s', '#5b8def'],
      ['conflicts/s', '#d9534f'],
      ['submitted/s', '#999'],
    ]}
      data=${columns(pts, ['placements', 'decisions', 'conflicts', 'submitted'])} />
    <${Chart} testid="chart-latency" title="submission → last placement (ms, over the last 10 s)" series=${[
      ['p50', '#5b8def'],
      ['p99', '#e08a1e'],
    ]} data=${columns(pts, ['p50', 'p99'])} />
    <p class="legend" data-testid="latency-gaps" data-gaps=${gaps}>Latency is drawn only for the seconds whose last 10 s placed something: ${gaps} of the last ${pts.length} seconds had no placement and are left blank, not joined.
      The same counters as <code>/metrics</code>: tarcil_tasks_placed_total, tarcil_decisions_total, tarcil_commit_conflicts_total, tarcil_scheduling_latency_seconds.</p>
  </section>`;
}
