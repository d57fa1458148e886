// The live state of the dashboard, as the front-end's event stream (/events) builds it: a
// snapshot, then deltas; and the page's route, from the URL's hash.
import { useEffect, useState } from 'preact/hooks';

export const live = {
  connected: false,
  racks: new Map(),
  rackVersion: new Map(),
  totals: null,
  jobs: new Map(),
  /** job id → the changes seen since the page opened: { at, state, tasks, message } */
  jobEvents: new Map(),
  admission: null,
  throughput: [],
  /** Bumped with every change of the cell (the nodes view reads the nodes again on it). */
  cellVersion: 0,
  version: 0,
};
const listeners = new Set();
function changed() {
  live.version++;
  for (const l of listeners) l(live.version);
}

const counts = (t) =>
  Object.entries(t ?? {})
    .filter(([, n]) => n > 0)
    .map(([s, n]) => `${s} ${n}`)
    .join(', ');

function noteJob(j) {
  const prev = live.jobs.get(j.id);
  const list = live.jobEvents.get(j.id) ?? [];
  if (!prev || prev.state !== j.state || counts(prev.taskStates) !== counts(j.taskStates) || (prev.message ?? '') !== (j.message ?? '')) {
    list.push({ at: j.updatedAt || Date.now(), state: j.state, tasks: counts(j.taskStates), message: j.message ?? '' });
    if (list.length > 200) list.shift();
    live.jobEvents.set(j.id, list);
  }
  live.jobs.set(j.id, j);
}

export function connect() {
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
    live.cellVersion++;
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
    live.cellVersion++;
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

export function useLive() {
  const [, set] = useState(0);
  useEffect(() => {
    listeners.add(set);
    return () => listeners.delete(set);
  }, []);
  return live;
}

/** The route: `#/<page>/<arg>/…`, each part URI-encoded (a job id may hold a '/'). */
export function useRoute() {
  const [hash, setHash] = useState(location.hash || '#/cell');
  useEffect(() => {
    const on = () => setHash(location.hash || '#/cell');
    addEventListener('hashchange', on);
    return () => removeEventListener('hashchange', on);
  }, []);
  return hash.slice(2).split('/').map(decodeURIComponent);
}

/** A link to a page of the dashboard. */
export const href = (...parts) => `#/${parts.map((p) => encodeURIComponent(String(p))).join('/')}`;
