// Admission: the LSH buckets and the jobs waiting.
import { h } from 'preact';
import htm from 'htm';
import { href, useLive } from './live.js';
import { age, ms } from './format.js';

const html = htm.bind(h);

export function AdmissionPage() {
  const l = useLive();
  const a = l.admission;
  if (!a) return html`<p>waiting for the front-end…</p>`;
  return html`<section data-testid="page-admission">
    <h2>Admission: the LSH buckets</h2>
    <p>Free RUs of each bucket of contention (band × cell), and the wait for one RU of it as the agents' admission estimates it: the time by which it is free with probability ${a.quantile}, from the intervals between the bucket's free events of the last ${age(a.windowMs)} this front-end watched, and the bound (μ + 2σ for one RU) a job waits only under.</p>
    <table class="grid"><thead><tr><th>bucket</th><th>band</th><th>cell</th><th>RMS contention</th><th>free / RUs</th><th></th><th>frees in window</th><th>wait for one RU</th><th>bound</th></tr></thead>
    <tbody>${a.buckets.map(
      (
        b,
      ) => html`<tr data-testid="bucket"><td>${b.bucket}</td><td>${b.band}</td><td>${b.cell}</td><td>${b.rms[0].toFixed(1)} – ${b.rms[1] === null ? '∞' : b.rms[1].toFixed(1)}</td>
        <td>${b.free} / ${b.total}</td><td><div class="meter"><i style=${`width:${b.total > 0 ? (100 * b.free) / b.total : 0}%`}></i></div></td><td>${b.history}</td>
        <td data-testid="wait">${b.waitMs === null ? 'no history' : b.waitMs === 0 ? 'now' : ms(b.waitMs)}</td><td>${b.boundMs === null ? '' : ms(b.boundMs)}</td></tr>`,
    )}</tbody></table>
    <h3>Waiting jobs</h3>
    ${
      a.waiting.length === 0
        ? html`<p data-testid="no-waiting">none</p>`
        : html`<ul>${a.waiting.map((w) => html`<li data-testid="waiting-job"><a href=${href('job', w.job)}>${w.job}</a>: ${w.waiting} (queued ${ms(w.queuedMs)})</li>`)}</ul>`
    }
  </section>`;
}
