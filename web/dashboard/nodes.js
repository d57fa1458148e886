// Nodes: every server with its RUs, its tasks (job, task, since when), its state and its load
// monitor's verdict, read from the front-end (api/nodes) again when the cell changes.
import { h } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';
import htm from 'htm';
import { href, useLive } from './live.js';
import { age, RU_STATES } from './format.js';

const html = htm.bind(h);

/**
 * Reads again at most this often while the cell changes; a large cell's list (every RU record of
 * the cell, read from the store) less often.
 */
const REFRESH_MS = 1500;
const LARGE_CELL = 1000;
const LARGE_REFRESH_MS = 15_000;
/** Rows shown at once (a filter narrows a large cell). */
const MAX_ROWS = 400;

function useNodes(cellVersion) {
  const [nodes, set] = useState(null);
  const last = useRef(0);
  const every = Array.isArray(nodes) && nodes.length > LARGE_CELL ? LARGE_REFRESH_MS : REFRESH_MS;
  useEffect(() => {
    let cancelled = false;
    const wait = Math.max(0, last.current + every - Date.now());
    const t = globalThis.setTimeout(() => {
      last.current = Date.now();
      fetch('api/nodes')
        .then((r) => (r.ok ? r.json() : r.text().then((x) => ({ error: x }))))
        .then(
          (x) => !cancelled && set(x),
          (err) => !cancelled && set({ error: String(err) }),
        );
    }, wait);
    return () => {
      cancelled = true;
      globalThis.clearTimeout(t);
    };
  }, [cellVersion]);
  return nodes;
}

function RuBar({ n }) {
  const schedulable = n.state === 'up';
  return html`<span class="rus" title=${`${n.busy} busy, ${n.free} free, ${n.down} down of ${n.rus} RUs`}>${[...n.slots].map(
    (c, i) => html`<i class=${`ru small ru-${c === 'f' && !schedulable ? 'u' : c}`} title=${`RU ${i}: ${RU_STATES[c === 'f' && !schedulable ? 'u' : c]}`}></i>`,
  )}</span>`;
}

export function NodesPage() {
  const l = useLive();
  const nodes = useNodes(l.cellVersion);
  const [text, setText] = useState('');
  const [state, setState] = useState('');
  if (!nodes) return html`<p>loading the nodes…</p>`;
  if (nodes.error) return html`<p class="error">${nodes.error}</p>`;
  const now = Date.now();
  const shown = nodes
    .filter((n) => state === '' || (state === 'not up' ? n.state !== 'up' : state === 'with tasks' ? n.tasks.length > 0 : n.state === state))
    .filter((n) => text === '' || `${n.id} ${n.platform} ${n.rack} ${n.tasks.map((t) => t.job).join(' ')}`.toLowerCase().includes(text.toLowerCase()));
  const count = (s) => nodes.filter((n) => n.state === s).length;
  return html`<section data-testid="page-nodes">
    <h2>Nodes</h2>
    <div class="stats">
      <div class="stat"><b data-testid="nodes-total">${nodes.length}</b><span>nodes</span></div>
      ${['up', 'blocked', 'cordoned', 'draining', 'drained', 'down'].map((s) => html`<div class=${`stat st-${s}`}><b data-testid=${`nodes-${s}`}>${count(s)}</b><span>${s}</span></div>`)}
      <div class="stat"><b>${nodes.reduce((a, n) => a + n.tasks.length, 0)}</b><span>tasks</span></div>
    </div>
    <div class="filters"><input data-testid="node-filter" placeholder="filter by node, rack or job" value=${text} onInput=${(e) => setText(e.target.value)} />
      <select data-testid="node-state-filter" value=${state} onChange=${(e) => setState(e.target.value)}>
        ${['', 'with tasks', 'not up', 'up', 'blocked', 'cordoned', 'draining', 'drained', 'down'].map((s) => html`<option value=${s}>${s || 'any state'}</option>`)}
      </select> <span>${Math.min(shown.length, MAX_ROWS)} of ${nodes.length}${shown.length > MAX_ROWS ? ' (filter to see the rest)' : ''}</span></div>
    ${nodes.length === 0 ? html`<p data-testid="no-nodes">No server has registered with the cell yet.</p>` : null}
    <table class="grid nodes"><thead><tr><th>node</th><th>rack</th><th>state</th><th>RUs</th><th>tasks (job, task, since)</th><th>load monitor</th></tr></thead>
      <tbody>${shown.slice(0, MAX_ROWS).map(
        (n) => html`<tr data-testid="node-row" data-node=${n.id} data-state=${n.state}>
          <td class="mono">${n.id}</td><td>${n.platform}/${n.rack}</td>
          <td><span class=${`badge ${n.state}`} data-testid="node-state">${n.state}</span>${
            n.cordon
              ? html`<br /><small>${n.cordon.mode === 'drain' ? 'drain' : 'cordon'} ${age(now - n.cordon.since)} ago${n.cordon.reason ? `: ${n.cordon.reason}` : ''}${n.cordon.deadlineAt ? `, deadline in ${age(n.cordon.deadlineAt - now)}` : ''}</small>`
              : null
          }${n.leftAt ? html`<br /><small>left ${age(now - n.leftAt)} ago</small>` : null}</td>
          <td data-testid="node-rus"><${RuBar} n=${n} /> ${n.busy}/${n.rus} busy</td>
          <td>${
            n.tasks.length === 0
              ? html`<span class="none">no tasks</span>`
              : html`<ul class="node-tasks">${n.tasks.map(
                  (t) =>
                    html`<li data-testid="node-task"><a href=${href('job', t.job)}>${t.job}</a> task ${t.task} <small>RU ${t.ru}${t.state === 'reserved' ? ', reserved' : ''}${t.since ? `, ${age(now - t.since)}` : ''}</small> <a href=${href('logs', t.job, t.task)} class="logs-link">logs</a></li>`,
                )}</ul>`
          }</td>
          <td class=${n.blocked ? 'load blocked' : n.load === 'ok' ? 'load ok' : 'load'} data-testid="node-load">${n.load}</td>
        </tr>`,
      )}</tbody></table>
  </section>`;
}
