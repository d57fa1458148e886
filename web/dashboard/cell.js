// The cell: racks as tiles, a rack's servers RU by RU.
import { h } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import htm from 'htm';
import { href, useLive } from './live.js';
import { qColour, RU_STATES } from './format.js';

const html = htm.bind(h);
const plural = (n, noun) => `${n} ${noun}${n === 1 ? '' : 's'}`;

export function Totals({ t }) {
  if (!t) return null;
  const item = (label, n, cls) => html`<div class="stat ${cls}" data-testid=${`total-${label}`}><b>${n}</b><span>${label}</span></div>`;
  return html`<div class="stats">
    ${item('servers', t.servers)} ${item('RUs', t.rus)} ${item('free', t.free, 'free')} ${item('busy', t.busy, 'busy')}
    ${item('reserved', t.reserved, 'reserved')} ${item('down', t.down, 'down')} ${item('unschedulable', t.unschedulable, 'unsched')}
    ${item('blocked servers', t.blocked, 'blocked')} ${item('cordoned servers', t.cordoned, 'cordoned')}
  </div>`;
}

function RackTile({ r, open, selected }) {
  const seg = (n, cls, colour) => (n > 0 ? html`<i class=${cls} style=${`flex:${n};${colour ? `background:${colour}` : ''}`}></i>` : null);
  const marks = (r.blocked > 0 ? '⚠' : '') + (r.cordoned > 0 ? '⊘' : '');
  return html`<button class=${`rack${selected ? ' on' : ''}`} data-testid="rack" data-rack=${r.key} data-busy=${r.busy + r.reserved} onClick=${() => open(r.key)}
      title=${`${r.key}: ${r.servers} servers, ${r.rus} RUs — free ${r.free}, busy ${r.busy}, reserved ${r.reserved}, down ${r.down}, unschedulable ${r.unschedulable}${r.q !== null ? `, mean Q ${r.q}` : ''}`}>
    <div class="rack-name">${r.rack} <span class="marks">${marks}</span></div>
    <div class="bar">${seg(r.busy, 'busy', qColour(r.q))}${seg(r.reserved, 'reserved')}${seg(r.free, 'free')}${seg(r.unschedulable, 'unsched')}${seg(r.down, 'down')}</div>
    <div class="rack-sub">${r.busy + r.reserved}/${r.rus} busy${r.q !== null ? html` · Q ${r.q.toFixed(2)}` : ''}</div>
  </button>`;
}

/** What an RU's square says when pointed at. */
export function ruTitle(server, i, u) {
  return `${server} RU ${i}: ${RU_STATES[u.s]}${u.job ? ` — job ${u.job}, task ${u.task}` : ''}${u.q !== undefined ? `, Q ${u.q.toFixed(3)}` : ''}`;
}

const ruLegend = html`<p class="legend" data-testid="ru-legend">Each square is one RU (one core), numbered on its server:
  <i class="ru ru-f"></i> free <i class="ru ru-b" style="background:#2a9d4a"></i> busy, coloured by its task's Q (red poor → green good; blue: Q unknown)
  <i class="ru ru-r"></i> reserved for a gang <i class="ru ru-u"></i> free but unschedulable (server blocked, cordoned or draining) <i class="ru ru-d"></i> down.
  Point at a square for its job and task; click a busy one for the job.</p>`;

function RackDetail({ rackKey, version }) {
  const [servers, set] = useState(null);
  useEffect(() => {
    fetch(`api/rack?key=${encodeURIComponent(rackKey)}`)
      .then((r) => r.json())
      .then(set, () => set([]));
  }, [rackKey, version]);
  if (!servers) return html`<p>loading ${rackKey}…</p>`;
  return html`<div class="detail" data-testid="rack-detail">
    <h3>${rackKey}: ${servers.length} server${servers.length === 1 ? '' : 's'}</h3>
    ${ruLegend}
    ${servers.map((s) => {
      const busy = s.rus.filter((u) => u.s === 'b' || u.s === 'r').length;
      const jobs = [...new Set(s.rus.filter((u) => u.job).map((u) => u.job))];
      return html`<div class="server ${s.state}" data-testid="server" data-server=${s.id}>
        <span class="sname">${s.id}${s.state !== 'up' ? html` <em class="badge ${s.state}">${s.state}</em>` : ''}</span>
        <span class="rus">${s.rus.map((u, i) => {
          const sq = html`<i class=${`ru ru-${u.s}`} data-state=${u.s} data-testid="ru" style=${u.s === 'b' ? `background:${qColour(u.q)}` : ''} title=${ruTitle(s.id, i, u)}>${i}</i>`;
          return u.job ? html`<a href=${href('job', u.job)}>${sq}</a>` : sq;
        })}</span>
        <span class="ssum">${busy}/${s.rus.length} busy${jobs.length > 0 ? ` · ${jobs.slice(0, 3).join(', ')}${jobs.length > 3 ? ` +${jobs.length - 3}` : ''}` : ''}</span>
      </div>`;
    })}
  </div>`;
}

export function CellPage() {
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
    <p class="legend" data-testid="rack-legend">Each tile is a rack; its bar, the rack's RUs: <i class="free"></i> free <i class="busy-q"></i> busy, coloured by its occupant's Q (red poor → green good; blue: Q unknown) <i class="reserved"></i> reserved
      <i class="unsched"></i> free but unschedulable <i class="down"></i> down · ⚠ blocked by its load monitor · ⊘ cordoned or draining. Click a rack for its servers; the Nodes tab lists every server with its tasks.</p>
    ${l.racks.size === 0 ? html`<p data-testid="no-racks">No server has registered with the cell yet.</p>` : null}
    ${[...byPlatform].map(
      ([p, racks]) => html`<div class="platform"><h3>${p} <small>${plural(
        racks.reduce((a, r) => a + r.servers, 0),
        'server',
      )}</small></h3>
        <div class="racks">${racks.map((r) => html`<${RackTile} key=${r.key} r=${r} open=${setOpen} selected=${r.key === open} />`)}</div></div>`,
    )}
    ${open ? html`<${RackDetail} rackKey=${open} version=${l.rackVersion.get(open) ?? 0} />` : null}
  </section>`;
}
