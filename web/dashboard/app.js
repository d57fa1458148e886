// The tarcil dashboard: one page per view (cell, nodes, admission, jobs, a job, a task's logs,
// throughput), routed by the URL's hash, fed by the front-end's server-sent events (/events).
// Bundled by scripts/build-dashboard.mjs (esbuild) into dist/dashboard/app.js.
import { h, render } from 'preact';
import htm from 'htm';
import 'uplot/dist/uPlot.min.css';
import './style.css';
import { connect, useLive, useRoute } from './live.js';
import { CellPage } from './cell.js';
import { NodesPage } from './nodes.js';
import { AdmissionPage } from './admission.js';
import { JobsPage } from './jobs.js';
import { JobPage } from './job.js';
import { LogsPage } from './logs.js';
import { ThroughputPage } from './throughput.js';

const html = htm.bind(h);

const TABS = [
  ['cell', 'Cell'],
  ['nodes', 'Nodes'],
  ['admission', 'Admission'],
  ['jobs', 'Jobs'],
  ['logs', 'Logs'],
  ['throughput', 'Throughput'],
];

function Page({ route }) {
  const [page, ...args] = route;
  switch (page) {
    case 'nodes':
      return html`<${NodesPage} />`;
    case 'admission':
      return html`<${AdmissionPage} />`;
    case 'jobs':
      return html`<${JobsPage} />`;
    case 'job':
      // A job id may hold a '/' (<namespace>/<id>).
      return html`<${JobPage} key=${args.join('/')} id=${args.join('/')} />`;
    case 'logs':
      return html`<${LogsPage} key=${args.join('/')} job=${args.slice(0, -1).join('/') || undefined} task=${args.length > 1 ? args[args.length - 1] : undefined} />`;
    case 'throughput':
      return html`<${ThroughputPage} />`;
    default:
      return html`<${CellPage} />`;
  }
}

function App() {
  const l = useLive();
  const route = useRoute();
  const page = route[0] || 'cell';
  const tab = ([p, label]) =>
    html`<a class=${page === p || (p === 'jobs' && page === 'job') ? 'on' : ''} href=${`#/${p}`} data-testid=${`tab-${p}`}>${label}</a>`;
  return html`<header><h1>tarcil</h1><nav>${TABS.map(tab)}</nav>
      <span class=${l.connected ? 'live on' : 'live'} data-testid="live">${l.connected ? '● live' : '○ reconnecting'}</span></header>
    <main><${Page} route=${route} /></main>`;
}

connect();
render(html`<${App} />`, document.getElementById('app'));
