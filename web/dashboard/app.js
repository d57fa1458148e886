// The tarcil dashboard: one page per view (cell, admission, jobs, a job, throughput), routed by
// the URL's hash, fed by the front-end's server-sent events (/events): a snapshot, then deltas.
// Bundled by scripts/build-dashboard.mjs (esbuild) into dist/dashboard/app.js.
import { h, render } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';
import htm from 'htm';
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';
import './style.css';

const html = htm.bind(h);

// ---------------------------------------------------------------------------------------------
// The live state, as the event stream builds it.

const live = {
  connected: false,
  racks: new Map(),
  rackVersion: new Map(),
  totals: null,
  jobs: new Map(),
  /** job id → the changes seen since the page opened: { at, state, taskStates } */
  jobEvents: new Map(),
  admission: null,
  throughput: [],
  version: 0,
};
const listeners = new Set();
function changed() {
  live.version++;
  for (const l of listeners) l(live.version);
}

function noteJob(j) {
  const prev = live.jobs.get(j.id);
  const list = live.jobEvents.get(j.id) ?? [];
  const counts = (t) => Object.entries(t ?? {}).filter(([, n]) => n > 0).map(([s, n]) => `${s} ${n}`).join(', ');
  if (!prev || prev.state !== j.state || counts(prev.taskStates) !== counts(j.taskStates)) {
    list.push({ at: j.updatedAt || Date.now(), state: j.state, tasks: counts(j.taskStates), message: j.message ?? '' });
    if (list.length > 200) list.shift();
    live.jobEvents.set(j.id, list);
  }
  live.jobs.set(j.id, j);
}

function connect() {
  const es = new EventSource('events');
  es.addEventListener('open', () => {
    live.connected = true;
    changed();
  });
  es.addEventListener('error', () => {
    live.connected = false;
    changed();
  });
  es.addEventListener('snapshot', (e) => {
    const s = JSON.parse(e.data);
    live.racks = new Map(s.racks.map((r) => [r.key, r]));
    for (const r of s.racks) live.rackVersion.set(r.key, (live.rackVersion.get(r.key) ?? 0) + 1);
    live.totals = s.totals;
    for (const j of s.jobs) noteJob(j);
    live.admission = s.admission;
    live.throughput = s.throughput;
    changed();
  });
  es.addEventListener('cell', (e) => {
    const d = JSON.parse(e.data);
    for (const r of d.racks) {
      live.racks.set(r.key, r);
      live.rackVersion.set(r.key, (live.rackVersion.get(r.key) ?? 0) + 1);
    }
    for (const k of d.removed) live.racks.delete(k);
    live.totals = d.totals;
    changed();
  });
  es.addEventListener('jobs', (e) => {
    const d = JSON.parse(e.data);
    for (const j of d.jobs) noteJob(j);
    for (const id of d.deleted) live.jobs.delete(id);
    changed();
  });
  es.addEventListener('admission', (e) => {
    live.admission = JSON.parse(e.data);
    changed();
  });
  es.addEventListener('throughput', (e) => {
    live.throughput = live.throughput.concat(JSON.parse(e.data)).slice(-600);
    changed();
  });
}

function useLive() {
  const [, set] = useState(0);
  useEffect(() => {
    listeners.add(set);
    return () => listeners.delete(set);
  }, []);
  return live;
}

function useRoute() {
  const [hash, setHash] = useState(location.hash || '#/cell');
  useEffect(() => {
    const on = () => setHash(location.hash || '#/cell');
    addEventListener('hashchange', on);
    return () => removeEventListener('hashchange', on);
  }, []);
  return hash.slice(2).split('/').map(decodeURIComponent);
}

// ---------------------------------------------------------------------------------------------
// Formatting.

/** Q in [0, 1] → a colour from red (poor) through amber to green (good). */
function qColour(q) {
  if (q === null || q === undefined) return '#5b8def';
  const x = Math.max(0, Math.min(1, q));
  return `hsl(${Math.round(x * 120)}, 65%, 45%)`;
}
function age(ms) {
  const s = Math.max(0, Math.round(ms / 1000));
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m${String(s % 60).padStart(2, '0')}s`;
  return `${Math.floor(s / 3600)}h${String(Math.floor((s % 3600) / 60)).padStart(2, '0')}m`;
}
const ms = (x) => (x === null || x === undefined ? '–' : x < 1000 ? `${Math.round(x * 10) / 10} ms` : `${Math.round(x / 100) / 10} s`);
const FINAL = new Set(['succeeded', 'failed', 'cancelled']);

// ---------------------------------------------------------------------------------------------
// The cell: racks as tiles, a rack's servers RU by RU.

function Totals({ t }) {
  if (!t) return null;
  const item = (label, n, cls) => html`<div class="stat ${cls}" data-testid=${`total-${label}`}><b>${n}</b><span>${label}</span></div>`;
  return html`<div class="stats">
    ${item('servers', t.servers)} ${item('RUs', t.rus)} ${item('free', t.free, 'free')} ${item('busy', t.busy, 'busy')}
    ${item('reserved', t.reserved, 'reserved')} ${item('down', t.down, 'down')} ${item('unschedulable', t.unschedulable, 'unsched')}
    ${item('blocked servers', t.blocked, 'blocked')} ${item('cordoned servers', t.cordoned, 'cordoned')}
  </div>`;
}

function RackTile({ r, open }) {
  const seg = (n, cls, colour) => (n > 0 ? html`<i class=${cls} style=${`flex:${n};${colour ? `background:${colour}` : ''}`}></i>` : null);
  const marks = (r.blocked > 0 ? '⚠' : '') + (r.cordoned > 0 ? '⊘' : '');
  return html`<button class="rack" data-testid="rack" data-rack=${r.key} data-busy=${r.busy + r.reserved} onClick=${() => open(r.key)}
      title=${`${r.key}: ${r.servers} servers, ${r.rus} RUs — free ${r.free}, busy ${r.busy}, reserved ${r.reserved}, down ${r.down}, unschedulable ${r.unschedulable}${r.q !== null ? `, mean Q ${r.q}` : ''}`}>
    <div class="rack-name">${r.rack} <span class="marks">${marks}</span></div>
    <div class="bar">${seg(r.busy, 'busy', qColour(r.q))}${seg(r.reserved, 'reserved')}${seg(r.free, 'free')}${seg(r.unschedulable, 'unsched')}${seg(r.down, 'down')}</div>
    <div class="rack-sub">${r.busy + r.reserved}/${r.rus} busy${r.q !== null ? html` · Q ${r.q.toFixed(2)}` : ''}</div>
  </button>`;
}

function RackDetail({ rackKey, version }) {
  const [servers, set] = useState(null);
  useEffect(() => {
    fetch(`api/rack?key=${encodeURIComponent(rackKey)}`)
      .then((r) => r.json())
      .then(set, () => set([]));
  }, [rackKey, version]);
  if (!servers) return html`<p>loading ${rackKey}…</p>`;
  return html`<div class="detail" data-testid="rack-detail">
    <h3>${rackKey}: ${servers.length} servers</h3>
    ${servers.map(
      (s) => html`<div class="server ${s.state}" data-testid="server" data-server=${s.id}>
        <span class="sname">${s.id}${s.state !== 'up' ? html` <em class="badge ${s.state}">${s.state}</em>` : ''}</span>
        <span class="rus">${s.rus.map(
          (u, i) =>
            html`<i class=${`ru ru-${u.s}`} data-state=${u.s} style=${u.s === 'b' ? `background:${qColour(u.q)}` : ''}
              title=${`RU ${i}: ${{ f: 'free', b: 'busy', r: 'reserved', d: 'down', u: 'unschedulable' }[u.s]}${u.job ? ` — ${u.job} task ${u.task}` : ''}${u.q !== undefined ? `, Q ${u.q.toFixed(3)}` : ''}`}></i>`,
        )}</span>
      </div>`,
    )}
  </div>`;
}

function CellPage() {
  const l = useLive();
  const [open, setOpen] = useState(null);
  const byPlatform = new Map();
  for (const r of l.racks.values()) {
    if (!byPlatform.has(r.platform)) byPlatform.set(r.platform, []);
    byPlatform.get(r.platform).push(r);
  }
  return html`<section data-testid="page-cell">
    <h2>The cell</h2>
    <${Totals} t=${l.totals} />
    <p class="legend"><i class="free"></i> free <i class="busy-q"></i> busy, coloured by its occupant's Q (red poor → green good; blue: Q unknown) <i class="reserved"></i> reserved
      <i class="unsched"></i> free but unschedulable <i class="down"></i> down · ⚠ blocked by its load monitor · ⊘ cordoned or draining. Click a rack for its servers.</p>
    ${[...byPlatform].map(
      ([p, racks]) => html`<div class="platform"><h3>${p} <small>${racks.reduce((a, r) => a + r.servers, 0)} servers</small></h3>
        <div class="racks">${racks.map((r) => html`<${RackTile} key=${r.key} r=${r} open=${setOpen} />`)}</div></div>`,
    )}
    ${open ? html`<${RackDetail} rackKey=${open} version=${l.rackVersion.get(open) ?? 0} />` : null}
  </section>`;
}

// ---------------------------------------------------------------------------------------------
// Admission.

function AdmissionPage() {
  const l = useLive();
  const a = l.admission;
  if (!a) return html`<p>waiting for the front-end…</p>`;
  return html`<section data-testid="page-admission">
    <h2>Admission: the LSH buckets</h2>
    <p>Free RUs of each bucket of contention (band × cell), and the wait for one RU of it as the agents' admission estimates it: the time by which it is free with probability ${a.quantile}, from the intervals between the bucket's free events of the last ${age(a.windowMs)} this front-end watched, and the bound (μ + 2σ for one RU) a job waits only under.</p>
    <table class="grid"><thead><tr><th>bucket</th><th>band</th><th>cell</th><th>RMS contention</th><th>free / RUs</th><th></th><th>frees in window</th><th>wait for one RU</th><th>bound</th></tr></thead>
    <tbody>${a.buckets.map(
      (b) => html`<tr data-testid="bucket"><td>${b.bucket}</td><td>${b.band}</td><td>${b.cell}</td><td>${b.rms[0].toFixed(1)} – ${b.rms[1] === null ? '∞' : b.rms[1].toFixed(1)}</td>
        <td>${b.free} / ${b.total}</td><td><div class="meter"><i style=${`width:${b.total > 0 ? (100 * b.free) / b.total : 0}%`}></i></div></td><td>${b.history}</td>
        <td data-testid="wait">${b.waitMs === null ? 'no history' : b.waitMs === 0 ? 'now' : ms(b.waitMs)}</td><td>${b.boundMs === null ? '' : ms(b.boundMs)}</td></tr>`,
    )}</tbody></table>
    <h3>Waiting jobs</h3>
    ${a.waiting.length === 0 ? html`<p>none</p>` : html`<ul>${a.waiting.map((w) => html`<li><a href=${`#/job/${w.job}`}>${w.job}</a>: ${w.waiting} (queued ${ms(w.queuedMs)})</li>`)}</ul>`}
  </section>`;
}

// ---------------------------------------------------------------------------------------------
// Jobs.

function Progress({ j }) {
  const t = j.taskStates ?? {};
  const n = Math.max(1, j.tasks);
  const w = (k) => `${(100 * (t[k] ?? 0)) / n}%`;
  return html`<div class="progress" title=${Object.entries(t).map(([k, v]) => `${k} ${v}`).join(', ')}>
    <i class="succeeded" style=${`width:${w('succeeded')}`}></i><i class="running" style=${`width:${w('running')}`}></i><i class="placed" style=${`width:${w('placed')}`}></i><i class="failed" style=${`width:${w('failed')}`}></i>
  </div>`;
}

function JobsPage() {
  const l = useLive();
  const [text, setText] = useState('');
  const [state, setState] = useState('');
  const now = Date.now();
  const jobs = [...l.jobs.values()]
    .filter((j) => (state === '' ? true : state === 'active' ? !FINAL.has(j.state) : j.state === state))
    .filter((j) => text === '' || `${j.id} ${j.name} ${j.profile}`.toLowerCase().includes(text.toLowerCase()))
    .sort((a, b) => b.submittedAt - a.submittedAt)
    .slice(0, 500);
  return html`<section data-testid="page-jobs">
    <h2>Jobs</h2>
    <div class="filters"><input data-testid="job-filter" placeholder="filter by id, name or profile" value=${text} onInput=${(e) => setText(e.target.value)} />
      <select data-testid="state-filter" value=${state} onChange=${(e) => setState(e.target.value)}>
        ${['', 'active', 'queued', 'admitted', 'placed', 'running', 'succeeded', 'failed', 'cancelled'].map((s) => html`<option value=${s}>${s || 'any state'}</option>`)}
      </select> <span>${jobs.length} of ${l.jobs.size}</span></div>
    <table class="grid"><thead><tr><th>job</th><th>name</th><th>profile</th><th>state</th><th>tasks</th><th>progress</th><th>age</th></tr></thead>
    <tbody>${jobs.map(
      (j) => html`<tr data-testid="job-row" data-job=${j.id} data-state=${j.state}><td><a href=${`#/job/${j.id}`}>${j.id}</a></td><td>${j.name}</td><td>${j.profile}</td>
        <td><span class=${`state ${j.state}`}>${j.state}</span></td><td>${j.taskStates?.succeeded ?? 0}/${j.tasks}</td><td><${Progress} j=${j} /></td>
        <td>${age((j.finishedAt ?? now) - j.submittedAt)}${FINAL.has(j.state) ? '' : ' …'}</td></tr>`,
    )}</tbody></table>
  </section>`;
}

const STAGES = [
  ['queueMs', 'queue'],
  ['admissionMs', 'admission'],
  ['sizeMs', 'sample size'],
  ['selectMs', 'select'],
  ['commitMs', 'commit'],
];

function Timeline({ e }) {
  const st = e.stages ?? {};
  const total = STAGES.reduce((a, [k]) => a + (st[k] ?? 0), 0);
  return html`<div class="timeline" data-testid="timeline">
    ${STAGES.map(([k, label]) =>
      (st[k] ?? 0) > 0 || total === 0
        ? html`<div class=${`stage ${k}`} style=${`flex:${Math.max(st[k] ?? 0, total * 0.04) || 1}`} title=${`${label}: ${ms(st[k] ?? 0)}`}><b>${label}</b><span>${ms(st[k] ?? 0)}</span></div>`
        : null,
    )}
  </div>`;
}

function Decision({ e }) {
  if (!e) return null;
  if (e.error) return html`<p class="error">${e.error}</p>`;
  const placements = e.placements ?? [];
  return html`<div class="decision" data-testid="decision">
    <h3>Decision record ${e.inProgress ? '(in progress)' : ''}</h3>
    <div class="stats">
      <div class="stat"><b>${e.agent || '–'}</b><span>agent</span></div>
      <div class="stat"><b>${(e.target ?? 0).toFixed(2)}</b><span>target Q</span></div>
      <div class="stat"><b data-testid="conflicts">${e.conflicts ?? 0}</b><span>conflicts</span></div>
      <div class="stat"><b>${e.retries ?? 0}</b><span>retries</span></div>
      <div class="stat"><b>${e.readmissions ?? 0}</b><span>readmissions</span></div>
      <div class="stat"><b>${ms(e.queuedMs)}</b><span>queued</span></div>
    </div>
    <h4>Time per stage</h4>
    <${Timeline} e=${e} />
    <h4>Samples</h4>
    <table class="grid"><thead><tr><th>attempt</th><th>R</th><th>f</th><th>candidates</th></tr></thead>
      <tbody>${(e.samples ?? []).map((s, i) => html`<tr data-testid="sample"><td>${i + 1}</td><td>${s.r}</td><td>${(s.f ?? 0).toFixed(3)}</td><td>${s.candidates}</td></tr>`)}</tbody></table>
    ${(e.admission ?? []).length > 0
      ? html`<h4>Admission</h4><ul>${e.admission.map((a) => html`<li>${a.action}: ${a.reason} (f ${(a.f ?? 0).toFixed(3)}, ${a.acceptableFree}/${a.totalFree} acceptable free, ${a.needed} needed)</li>`)}</ul>`
      : null}
    <h4>Placements (Q of each)</h4>
    <div class="placements">${placements.map(
      (p) => html`<span class="placement" data-testid="placement" style=${`background:${qColour(p.q)}`} title=${`task ${p.task} → ${p.ru?.server}#${p.ru?.index}, Q ${(p.q ?? 0).toFixed(3)}${p.acceptable ? '' : ' (below target)'}`}>
        ${p.task}: ${p.ru?.server}#${p.ru?.index} Q ${(p.q ?? 0).toFixed(2)}</span>`,
    )}${e.placementsOmitted ? html`<span>… and ${e.placementsOmitted} more</span>` : null}</div>
    <details><summary>As <code>tarcil explain</code> prints it</summary><pre>${e.text}</pre></details>
  </div>`;
}

function JobPage({ id }) {
  const l = useLive();
  const summary = l.jobs.get(id);
  const [data, set] = useState(null);
  const stamp = summary ? `${summary.state}/${summary.updatedAt}/${JSON.stringify(summary.taskStates)}` : '';
  useEffect(() => {
    fetch(`api/job?id=${encodeURIComponent(id)}`)
      .then((r) => (r.ok ? r.json() : r.text().then((t) => ({ error: t }))))
      .then(set, (err) => set({ error: String(err) }));
  }, [id, stamp]);
  const job = data?.job;
  const events = l.jobEvents.get(id) ?? [];
  return html`<section data-testid="page-job">
    <h2>Job ${id} ${summary ? html`<span class=${`state ${summary.state}`} data-testid="job-state">${summary.state}</span>` : null}</h2>
    ${data?.error ? html`<p class="error">${data.error}</p>` : null}
    ${summary ? html`<p>${summary.name} · ${summary.profile} · ${summary.tasks} tasks · submitted ${new Date(summary.submittedAt).toLocaleTimeString()}</p><${Progress} j=${summary} />` : null}
    <div class="cols">
      <div><${Decision} e=${data?.explanation} /></div>
      <div>
        <h3>Events</h3>
        <ol class="events" data-testid="events">${events.map((ev) => html`<li><time>${new Date(ev.at).toLocaleTimeString()}</time> <span class=${`state ${ev.state}`}>${ev.state}</span> ${ev.tasks} ${ev.message}</li>`)}</ol>
        <h3>Tasks</h3>
        <table class="grid"><thead><tr><th>task</th><th>state</th><th>RU</th><th>attempt</th></tr></thead>
          <tbody>${(job?.taskList ?? []).map(
            (t) => html`<tr data-testid="task"><td>${t.index}</td><td><span class=${`state ${t.state}`}>${t.state}</span></td><td>${t.ru?.server ? `${t.ru.server}#${t.ru.index}` : '–'}</td><td>${t.attempt}</td></tr>`,
          )}</tbody></table>
      </div>
    </div>
  </section>`;
}

// ---------------------------------------------------------------------------------------------
// Throughput and latency.

function Chart({ title, series, data, testid }) {
  const el = useRef(null);
  const plot = useRef(null);
  useEffect(() => {
    const width = Math.max(300, (el.current?.clientWidth ?? 600) - 10);
    plot.current = new uPlot(
      { title, width, height: 220, series: [{}, ...series.map(([label, stroke]) => ({ label, stroke, width: 2, spanGaps: true }))], axes: [{}, { size: 60 }], scales: { x: { time: true } } },
      data,
      el.current,
    );
    return () => plot.current?.destroy();
  }, []);
  useEffect(() => plot.current?.setData(data), [data]);
  return html`<div class="chart" data-testid=${testid} ref=${el}></div>`;
}

function ThroughputPage() {
  const l = useLive();
  const pts = l.throughput;
  const t = pts.map((p) => p.t / 1000);
  const last = pts[pts.length - 1];
  return html`<section data-testid="page-throughput">
    <h2>Throughput and latency</h2>
    <div class="stats">
      <div class="stat"><b data-testid="placements-total">${last ? last.placedTotal : 0}</b><span>tasks placed since the front-end started</span></div>
      <div class="stat"><b>${last ? last.placements : 0}</b><span>placements/s now</span></div>
      <div class="stat"><b>${ms(last?.p50)}</b><span>submit → placed p50 (10 s)</span></div>
      <div class="stat"><b>${ms(last?.p99)}</b><span>p99</span></div>
      <div class="stat"><b>${last ? last.conflictsTotal : 0}</b><span>commit conflicts since it started</span></div>
    </div>
    <${Chart} testid="chart-rate" title="per second" series=${[['placements/s', '#2a9d4a'], ['decisions/s', '#5b8def'], ['conflicts/s', '#d9534f'], ['submitted/s', '#999']]}
      data=${[t, pts.map((p) => p.placements), pts.map((p) => p.decisions), pts.map((p) => p.conflicts), pts.map((p) => p.submitted)]} />
    <${Chart} testid="chart-latency" title="submission → last placement (ms, over 10 s)" series=${[['p50', '#5b8def'], ['p99', '#e08a1e']]}
      data=${[t, pts.map((p) => p.p50), pts.map((p) => p.p99)]} />
    <p class="legend">The same counters as <code>/metrics</code>: tarcil_tasks_placed_total, tarcil_decisions_total, tarcil_commit_conflicts_total, tarcil_scheduling_latency_seconds.</p>
  </section>`;
}

// ---------------------------------------------------------------------------------------------

function App() {
  const l = useLive();
  const [page, arg] = useRoute();
  const tab = (p, label) => html`<a class=${page === p || (p === 'jobs' && page === 'job') ? 'on' : ''} href=${`#/${p}`} data-testid=${`tab-${p}`}>${label}</a>`;
  return html`<header><h1>tarcil</h1><nav>${tab('cell', 'Cell')}${tab('admission', 'Admission')}${tab('jobs', 'Jobs')}${tab('throughput', 'Throughput')}</nav>
      <span class=${l.connected ? 'live on' : 'live'} data-testid="live">${l.connected ? '● live' : '○ reconnecting'}</span></header>
    <main>${page === 'admission' ? html`<${AdmissionPage} />` : page === 'jobs' ? html`<${JobsPage} />` : page === 'job' ? html`<${JobPage} id=${arg} />` : page === 'throughput' ? html`<${ThroughputPage} />` : html`<${CellPage} />`}</main>`;
}

connect();
render(html`<${App} />`, document.getElementById('app'));
