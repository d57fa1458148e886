// Jobs: the list, filtered by text and state.
import { h } from 'preact';
import { useState } from 'preact/hooks';
import htm from 'htm';
import { href, useLive } from './live.js';
import { age, FINAL } from './format.js';

const html = htm.bind(h);

export function Progress({ j }) {
  const t = j.taskStates ?? {};
  const n = Math.max(1, j.tasks);
  const w = (k) => `${(100 * (t[k] ?? 0)) / n}%`;
  return html`<div class="progress" title=${Object.entries(t)
    .map(([k, v]) => `${k} ${v}`)
    .join(', ')}>
    <i class="succeeded" style=${`width:${w('succeeded')}`}></i><i class="running" style=${`width:${w('running')}`}></i><i class="placed" style=${`width:${w('placed')}`}></i><i class="failed" style=${`width:${w('failed')}`}></i>
  </div>`;
}

export function JobsPage() {
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
      </select> <span data-testid="jobs-count">${jobs.length} of ${l.jobs.size}</span></div>
    ${l.jobs.size === 0 ? html`<p data-testid="no-jobs">No job yet: submit one with <code>tarcil submit</code>.</p>` : null}
    <table class="grid"><thead><tr><th>job</th><th>name</th><th>profile</th><th>state</th><th>tasks done</th><th>progress</th><th>age</th><th>now</th></tr></thead>
    <tbody>${jobs.map(
      (
        j,
      ) => html`<tr data-testid="job-row" data-job=${j.id} data-state=${j.state}><td><a href=${href('job', j.id)}>${j.id}</a></td><td>${j.name}</td><td>${j.profile}</td>
        <td><span class=${`state ${j.state}`}>${j.state}</span></td><td>${j.taskStates?.succeeded ?? 0}/${j.tasks}</td><td><${Progress} j=${j} /></td>
        <td>${age((j.finishedAt ?? now) - j.submittedAt)}${FINAL.has(j.state) ? '' : ' …'}</td><td class="msg">${FINAL.has(j.state) ? '' : (j.message ?? '')}</td></tr>`,
    )}</tbody></table>
  </section>`;
}
