// A job: its current reason first, its placements next, then its tasks and events, then the
// decision record (time per stage, sample attempts and admission verdicts, repeated runs folded).
import { h } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import htm from 'htm';
import { href, useLive } from './live.js';
import { ms, qColour } from './format.js';
import { currentReason, foldAdmission, foldEvents, foldSamples, span } from './fold.js';
import { Progress } from './jobs.js';

const html = htm.bind(h);

const STAGES = [
  ['queueMs', 'queue'],
  ['admissionMs', 'admission'],
  ['sizeMs', 'sample size'],
  ['selectMs', 'select'],
  ['commitMs', 'commit'],
];

/** Time per stage: a bar of the stages in proportion, and each stage's name and time beside a key (never cut). */
function Timeline({ e }) {
  const st = e.stages ?? {};
  const total = STAGES.reduce((a, [k]) => a + (st[k] ?? 0), 0);
  return html`<div data-testid="timeline">
    <div class="timeline">${STAGES.map(([k, label]) =>
      (st[k] ?? 0) > 0
        ? html`<div class=${`stage ${k}`} style=${`width:${Math.max(1, (100 * st[k]) / total)}%`} title=${`${label}: ${ms(st[k])}`}></div>`
        : null,
    )}</div>
    <ul class="stage-key">${STAGES.map(
      ([k, label]) =>
        html`<li class="stage-label" data-testid="stage-label"><i class=${`stage ${k}`}></i><b>${label}</b> ${ms(st[k] ?? 0)}${total > 0 ? html` <small>${Math.round((100 * (st[k] ?? 0)) / total)}%</small>` : null}</li>`,
    )}</ul>
  </div>`;
}

/** The reason as a sentence: a capital first, a full stop last. */
const sentence = (t) => {
  const s = String(t ?? '').trim();
  return s === '' ? s : `${s[0].toUpperCase()}${s.slice(1)}${/[.!?]$/.test(s) ? '' : '.'}`;
};

function ReasonBox({ reason }) {
  if (!reason) return null;
  const holders = reason.holders ?? [];
  // What the sentence does not say already: how long and how many attempts; its holders, linked.
  const facts = [];
  if (reason.waitedMs) facts.push(`submitted ${ms(Number(reason.waitedMs))} ago`);
  if (reason.attempts) facts.push(`${reason.attempts} attempt${reason.attempts === 1 ? '' : 's'} so far`);
  return html`<div class=${`reason ${reason.kind ?? ''}`} data-testid="reason" data-kind=${reason.kind ?? ''}>
    <p class="reason-text" data-testid="reason-text">${sentence(reason.text)}</p>
    ${
      facts.length > 0 || holders.length > 0
        ? html`<p class="reason-facts">${facts.join(' · ')}${
            holders.length > 0
              ? html`${facts.length > 0 ? ' · ' : ''}held by ${holders.map((x, i) => html`${i > 0 ? ', ' : ''}<a href=${href('job', x.job)}>${x.job}</a> (${x.rus} RU${x.rus === 1 ? '' : 's'})`)}`
              : null
          }</p>`
        : null
    }
  </div>`;
}

function Placements({ e, summary }) {
  const placements = e?.placements ?? [];
  const queued = summary?.taskStates?.queued ?? 0;
  return html`<div data-testid="placements">
    <h3>Placements ${placements.length > 0 ? html`<small>(${placements.length + (e.placementsOmitted ?? 0)}, coloured by Q)</small>` : null}</h3>
    ${
      placements.length === 0
        ? html`<p data-testid="no-placements">None yet${queued > 0 ? `: ${queued} task${queued === 1 ? '' : 's'} wait${queued === 1 ? 's' : ''} to be placed` : ''}.</p>`
        : html`<div class="placements">${placements.map(
            (
              p,
            ) => html`<span class="placement" data-testid="placement" style=${`background:${qColour(p.q)}`} title=${`task ${p.task} → ${p.ru?.server} RU ${p.ru?.index}, Q ${(p.q ?? 0).toFixed(3)}${p.acceptable ? '' : ' (below target)'}`}>
            ${p.task} → ${p.ru?.server}#${p.ru?.index} · Q ${(p.q ?? 0).toFixed(2)}</span>`,
          )}${e.placementsOmitted ? html`<span>… and ${e.placementsOmitted} more</span>` : null}</div>`
    }
  </div>`;
}

function Decision({ e }) {
  if (!e) return null;
  if (e.error) return html`<p class="error">${e.error}</p>`;
  const samples = foldSamples(e.samples);
  const admission = foldAdmission(e.admission);
  return html`<div class="decision" data-testid="decision">
    <h3>Decision record ${e.inProgress ? '(in progress)' : ''}</h3>
    <div class="stats">
      <div class="stat"><b>${e.agent || '–'}</b><span>agent</span></div>
      <div class="stat"><b>${(e.target ?? 0).toFixed(2)}</b><span>target Q</span></div>
      <div class="stat"><b data-testid="conflicts">${e.conflicts ?? 0}</b><span>conflicts</span></div>
      <div class="stat"><b>${e.retries ?? 0}</b><span>retries</span></div>
      <div class="stat"><b>${e.readmissions ?? 0}</b><span>returns to admission</span></div>
      <div class="stat"><b>${ms(e.queuedMs)}</b><span>queued</span></div>
    </div>
    <h4>Time per stage</h4>
    <${Timeline} e=${e} />
    <h4>Sample attempts <small data-testid="samples-summary" data-total=${(e.samples ?? []).length}>${(e.samples ?? []).length}${samples.length < (e.samples ?? []).length ? `, in ${samples.length} line${samples.length === 1 ? '' : 's'}` : ''}</small></h4>
    ${
      samples.length === 0
        ? html`<p data-testid="no-samples">None yet: no RU was sampled for it.</p>`
        : html`<table class="grid"><thead><tr><th>attempts</th><th>R (sample size)</th><th>f</th><th>candidates</th><th>times</th></tr></thead>
      <tbody>${samples.map(
        (
          g,
        ) => html`<tr data-testid="sample" data-count=${g.count}><td>${span(g, 'attempt')}</td><td>${g.item.r}</td><td>${(g.item.f ?? 0).toFixed(3)}</td><td>${g.item.candidates}</td>
          <td>${g.count > 1 ? html`<b class="count" data-testid="fold-count">×${g.count}</b>` : ''}</td></tr>`,
      )}</tbody></table>`
    }
    ${
      admission.length > 0
        ? html`<h4>Admission <small data-testid="admission-summary" data-total=${(e.admission ?? []).length}>${(e.admission ?? []).length} verdict${(e.admission ?? []).length === 1 ? '' : 's'}${admission.length < (e.admission ?? []).length ? `, in ${admission.length} line${admission.length === 1 ? '' : 's'}` : ''}</small></h4>
        <ul class="admission">${admission.map(
          ({ item: a, count }) =>
            html`<li data-testid="admission-line" data-count=${count}>${count > 1 ? html`<b class="count" data-testid="fold-count">×${count}</b> ` : null}${a.action}: ${a.reason}${' '}<small>(latest: f ${(a.f ?? 0).toFixed(3)}, ${a.acceptableFree}/${a.totalFree} acceptable free, ${a.needed} needed)</small></li>`,
        )}</ul>`
        : null
    }
    <details><summary>As <code>tarcil explain</code> prints it</summary><pre>${e.text}</pre></details>
  </div>`;
}

export function JobPage({ id }) {
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
  const e = data?.explanation;
  const events = foldEvents(l.jobEvents.get(id));
  const reason = currentReason(e?.error ? undefined : e, summary);
  return html`<section data-testid="page-job">
    <h2>Job ${id} ${summary ? html`<span class=${`state ${summary.state}`} data-testid="job-state">${summary.state}</span>` : null}</h2>
    ${data?.error ? html`<p class="error">${data.error}</p>` : null}
    ${
      summary
        ? html`<p class="job-line">${summary.name} · ${summary.profile} · ${summary.tasks} tasks${job?.mode === 'gang' ? ' (gang)' : ''} · submitted ${new Date(summary.submittedAt).toLocaleTimeString()} <${Progress} j=${summary} /></p>`
        : null
    }
    <${ReasonBox} reason=${reason} />
    <${Placements} e=${e?.error ? undefined : e} summary=${summary} />
    <div class="cols">
      <div>
        <h3>Tasks</h3>
        ${
          (job?.taskList ?? []).length === 0
            ? html`<p data-testid="no-tasks">No task record yet${summary && summary.tasks > 0 ? `: the ${summary.tasks} tasks get theirs when they are placed` : ''}.</p>`
            : html`<table class="grid"><thead><tr><th>task</th><th>state</th><th>RU</th><th>attempt</th><th></th></tr></thead>
          <tbody>${(job?.taskList ?? []).map(
            (
              t,
            ) => html`<tr data-testid="task"><td>${t.index}</td><td><span class=${`state ${t.state}`}>${t.state}</span></td><td>${t.ru?.server ? `${t.ru.server}#${t.ru.index}` : '–'}</td><td>${t.attempt}</td>
              <td>${t.ru?.server ? html`<a href=${href('logs', id, t.index)} data-testid="task-logs">logs</a>` : null}</td></tr>`,
          )}</tbody></table>`
        }
      </div>
      <div>
        <h3>Events <small>seen since this page opened</small></h3>
        <ol class="events" data-testid="events">${events.map(
          ({ item: ev, count }) =>
            html`<li><time>${new Date(ev.at).toLocaleTimeString()}</time> <span class=${`state ${ev.state}`}>${ev.state}</span> ${ev.tasks} ${ev.message}${count > 1 ? html` <b class="count">×${count}</b>` : null}</li>`,
        )}</ol>
      </div>
    </div>
    <${Decision} e=${e} />
  </section>`;
}
