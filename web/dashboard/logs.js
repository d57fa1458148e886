// A task's logs: its stdout and stderr as the node's monitor serves them (the front-end's
// TaskLogs relayed by api/logs), followed while the attempt runs.
import { h } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import htm from 'htm';
import { href } from './live.js';

const html = htm.bind(h);
/** Characters kept on the page (the oldest go first). */
const MAX_TEXT = 400_000;

function useLog(job, task) {
  const [log, set] = useState({ parts: [], status: 'reading', error: null, paths: [] });
  useEffect(() => {
    if (!job || task === undefined || task === '') return undefined;
    const ctl = new globalThis.AbortController();
    let parts = [];
    const paths = [];
    let size = 0;
    set({ parts, status: 'reading', error: null, paths });
    const take = (m) => {
      if (m.text) {
        const last = parts[parts.length - 1];
        if (last && last.stream === m.stream) parts = [...parts.slice(0, -1), { stream: m.stream, text: last.text + m.text }];
        else parts = [...parts, { stream: m.stream, text: m.text }];
        size += m.text.length;
        while (size > MAX_TEXT && parts.length > 1) size -= parts.shift().text.length;
      }
      if (m.path) paths.push(m.path);
      if (m.end) set({ parts, status: 'ended', error: null, paths });
      else if (m.error) set({ parts, status: 'ended', error: `${m.code}: ${m.error}`, paths });
      else set({ parts, status: 'following', error: null, paths });
    };
    (async () => {
      const r = await fetch(`api/logs?job=${encodeURIComponent(job)}&task=${encodeURIComponent(task)}&follow=1`, { signal: ctl.signal });
      if (!r.ok) {
        set({ parts, status: 'ended', error: (await r.text()).trim(), paths });
        return;
      }
      const reader = r.body.getReader();
      const dec = new globalThis.TextDecoder();
      let buf = '';
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buf += dec.decode(value, { stream: true });
        let nl;
        while ((nl = buf.indexOf('\n')) >= 0) {
          const line = buf.slice(0, nl);
          buf = buf.slice(nl + 1);
          if (line) take(JSON.parse(line));
        }
      }
    })().catch((err) => {
      if (!ctl.signal.aborted) set({ parts, status: 'ended', error: String(err), paths });
    });
    return () => ctl.abort();
  }, [job, task]);
  return log;
}

export function LogsPage({ job, task }) {
  const [j, setJ] = useState(job ?? '');
  const [t, setT] = useState(task ?? '0');
  const log = useLog(job, task);
  const go = (e) => {
    e.preventDefault();
    location.hash = href('logs', j.trim(), t.trim());
  };
  return html`<section data-testid="page-logs">
    <h2>Task logs</h2>
    <form class="filters" onSubmit=${go}>
      <input data-testid="logs-job" placeholder="job id" value=${j} onInput=${(e) => setJ(e.target.value)} />
      <input data-testid="logs-task" class="short" placeholder="task" value=${t} onInput=${(e) => setT(e.target.value)} />
      <button type="submit">show</button>
    </form>
    ${
      !job
        ? html`<p>A task's stdout and stderr, as its node keeps them (the process executor writes them; the simulated executor writes none). Open one from a job's task list or the Nodes tab, or name it here.</p>`
        : html`<p>Task ${task} of <a href=${href('job', job)}>${job}</a> — <span data-testid="logs-status">${log.status}</span>${log.paths.length > 0 ? html` <small>(${log.paths.join(', ')})</small>` : null}</p>
        ${log.error ? html`<p class="error" data-testid="logs-error">${log.error}</p>` : null}
        <pre class="log" data-testid="log">${log.parts.map((p) => html`<span class=${p.stream}>${p.text}</span>`)}</pre>
        ${log.parts.length === 0 && !log.error && log.status === 'ended' ? html`<p data-testid="logs-empty">The task wrote nothing.</p>` : null}`
    }
  </section>`;
}
