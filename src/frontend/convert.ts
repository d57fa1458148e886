/**
 * Conversions between the store's records and the gRPC messages (jobs, tasks and their attempts,
 * servers, explanations), and the text `explain` prints.
 */
import { namespaceOfJob } from '../tenancy/namespace.ts';
import type { DecisionRecord } from '../agent/agent.ts';
import { trimDecision } from '../state/decisions.ts';
import type { CordonRecord, LiveJobRecord, LiveServerRecord, LiveTaskRecord, LoadReportRecord, StoredDecisions } from '../state/live-records.ts';
import type { RuRecord } from '../model/types.ts';
import type { Explanation } from '../rpc/gen/tarcil/v1/Explanation.ts';
import type { InlineProfile__Output } from '../rpc/gen/tarcil/v1/InlineProfile.ts';
import type { Job } from '../rpc/gen/tarcil/v1/Job.ts';
import type { Reason } from '../rpc/gen/tarcil/v1/Reason.ts';
import { foldRuns } from '../util/fold-runs.ts';
import type { JobSpec__Output } from '../rpc/gen/tarcil/v1/JobSpec.ts';
import type { Server } from '../rpc/gen/tarcil/v1/Server.ts';
import type { Task } from '../rpc/gen/tarcil/v1/Task.ts';

/**
 * Turns a structured spec into the JSON form parseJobSpec validates, keeping "absent" absent:
 * proto3 `optional` fields carry presence, empty repeated fields and maps count as absent.
 */
export function specInputFromProto(s: JobSpec__Output): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  if (s.name !== undefined) out.name = s.name;
  if (s.profile === 'profileName' && s.profileName !== undefined) out.profile = s.profileName;
  else if (s.profile === 'inlineProfile' && s.inlineProfile) out.profile = inlineFromProto(s.inlineProfile);
  if (s.tasks !== undefined) out.tasks = s.tasks;
  if (s.priority !== undefined) out.priority = s.priority;
  if (s.mode !== undefined) out.mode = s.mode;
  if (s.maxQueueMs !== undefined) out.maxQueueMs = s.maxQueueMs;
  if (s.durationMs !== undefined) out.durationMs = s.durationMs;
  if (s.migratable !== undefined) out.migratable = s.migratable;
  if (s.scaleOut) out.scaleOut = s.scaleOut.maxTasks !== undefined ? { maxTasks: s.scaleOut.maxTasks } : {};
  if (s.namespace !== undefined) out.namespace = s.namespace;
  if (s.locality) {
    const l: Record<string, unknown> = {};
    if (s.locality.mode !== undefined) l.mode = s.locality.mode;
    if (s.locality.scope !== undefined) l.scope = s.locality.scope;
    if (s.locality.required !== undefined) l.required = s.locality.required;
    out.locality = l;
  }
  if (s.constraints) {
    const c: Record<string, unknown> = {};
    if (s.constraints.platforms.length > 0) c.platforms = s.constraints.platforms;
    if (Object.keys(s.constraints.attributes).length > 0) c.attributes = s.constraints.attributes;
    if (s.constraints.dataServers.length > 0) c.dataServers = s.constraints.dataServers;
    out.constraints = c;
  }
  if (s.command) {
    const c: Record<string, unknown> = { argv: s.command.argv };
    if (Object.keys(s.command.env).length > 0) c.env = s.command.env;
    out.command = c;
  }
  return out;
}

function inlineFromProto(p: InlineProfile__Output): Record<string, unknown> {
  const out: Record<string, unknown> = { caused: p.caused };
  if (p.name !== undefined) out.name = p.name;
  if (p.description !== undefined) out.description = p.description;
  if (p.family !== undefined) out.family = p.family;
  if (Object.keys(p.platformPerf).length > 0) out.platformPerf = p.platformPerf;
  if (p.typicalDurationMs !== undefined) out.typicalDurationMs = p.typicalDurationMs;
  if (p.latencyCritical !== undefined) out.latencyCritical = p.latencyCritical;
  return out;
}

export function taskToProto(t: LiveTaskRecord): Task {
  return {
    index: t.index,
    state: t.state,
    ...(t.ru ? { ru: { server: t.ru.server, index: t.ru.index } } : {}),
    attempt: t.attempt,
    placedAtMs: t.placedAt ?? 0,
    startedAtMs: t.startedAt ?? 0,
    endedAtMs: t.endedAt ?? 0,
    ...(t.exitCode !== undefined ? { exitCode: t.exitCode } : {}),
    message: t.message ?? '',
    logPath: t.logPath ?? '',
    previous: (t.previous ?? []).map((a) => ({
      attempt: a.attempt,
      ...(a.ru ? { ru: { server: a.ru.server, index: a.ru.index } } : {}),
      placedAtMs: a.placedAt ?? 0,
      startedAtMs: a.startedAt ?? 0,
      endedAtMs: a.endedAt ?? 0,
      state: a.state,
      message: a.message ?? '',
    })),
  };
}

/** One line per attempt of a task: where, when, how it ended (`status` and `explain` print these). */
export function attemptLines(t: {
  index?: number;
  attempt?: number;
  state?: string;
  ru?: { server?: string; index?: number } | null;
  placedAtMs?: number | string;
  previous?: readonly TaskAttemptLike[];
}): string[] {
  const where = (ru: { server?: string; index?: number } | null | undefined): string => (ru ? `${ru.server ?? '?'}/${ru.index ?? '?'}` : '?');
  const at = (ms: number | string | undefined): string => (ms ? new Date(Number(ms)).toISOString().slice(11, 23) : '?');
  const lines = (t.previous ?? []).map(
    (a) =>
      `  task ${t.index ?? 0} attempt ${a.attempt ?? 0}: ${where(a.ru)}, placed ${at(a.placedAtMs)}, ${a.startedAtMs ? `started ${at(a.startedAtMs)}, ` : ''}ended ${at(a.endedAtMs)} ${a.state ?? ''}${a.message ? ` (${a.message}); placed again` : '; placed again'}`,
  );
  lines.push(`  task ${t.index ?? 0} attempt ${t.attempt ?? 0}: ${where(t.ru)}, placed ${at(t.placedAtMs)}, now ${t.state ?? ''}`);
  return lines;
}

interface TaskAttemptLike {
  attempt?: number;
  ru?: { server?: string; index?: number } | null;
  placedAtMs?: number | string;
  startedAtMs?: number | string;
  endedAtMs?: number | string;
  state?: string;
  message?: string;
}

/** A job record's task counts by state (what the record holds that is a number). */
export function taskStateCounts(rec: LiveJobRecord): Record<string, number> {
  const states: Record<string, number> = {};
  for (const [k, v] of Object.entries(rec.taskStates ?? {})) if (typeof v === 'number') states[k] = v;
  return states;
}

export function jobToProto(id: string, rec: LiveJobRecord, owner: string, tasks?: LiveTaskRecord[], reports?: LoadReportRecord[]): Job {
  const states = taskStateCounts(rec);
  return {
    id,
    name: rec.spec.name,
    state: rec.state,
    profile: rec.spec.profile.name,
    tasks: rec.spec.tasks,
    priority: rec.spec.priority,
    mode: rec.spec.mode,
    owner,
    submittedAtMs: rec.submittedAt,
    updatedAtMs: rec.updatedAt,
    finishedAtMs: rec.finishedAt ?? 0,
    message: rec.message ?? '',
    taskStates: states,
    taskList: (tasks ?? []).map(taskToProto),
    rescheduled: rec.rescheduled ?? 0,
    scaledOut: rec.scaledOut ?? 0,
    namespace: namespaceOfJob(id),
    cancelRequested: rec.cancelRequested === true,
    loadReports: (reports ?? []).map((r) => ({ task: r.task, server: r.server, rate: r.rate, atMs: r.at })),
  };
}

/**
 * A server as GetCluster shows it: `cordon` is its `tarcil node` cordon or drain, `leftAt` when it
 * left the cell (a server no longer registered, shown down for a while).
 */
export function serverToProto(s: LiveServerRecord, rus: Map<number, RuRecord>, cordon?: CordonRecord, leftAt?: number): Server {
  const list = Array.from({ length: s.rus }, (_, i) => {
    const r = leftAt === undefined ? rus.get(i) : undefined;
    return { index: i, state: r?.state ?? 'down', job: r?.job ?? '', task: r?.task ?? 0 };
  });
  const busy = list.filter((r) => r.state === 'busy' || r.state === 'reserved').length;
  const state =
    s.state === 'down' || leftAt !== undefined
      ? 'down'
      : cordon?.mode === 'drain'
        ? busy > 0
          ? 'draining'
          : 'drained'
        : cordon
          ? 'cordoned'
          : s.blocked
            ? 'blocked'
            : 'up';
  return {
    id: s.id,
    platform: s.platform,
    rack: s.rack,
    state,
    endpoint: s.endpoint ?? '',
    rus: list,
    free: list.filter((r) => r.state === 'free').length,
    busy,
    cordoned: cordon !== undefined,
    draining: cordon?.mode === 'drain',
    drainDeadlineMs: cordon?.deadlineAt ?? 0,
    cordonReason: cordon?.reason ?? '',
    leftAtMs: leftAt ?? 0,
  };
}

/** Every decision made for the job, merged, plus a readable account. */
export function explanationToProto(
  id: string,
  state: string,
  stored: StoredDecisions | undefined,
  live: DecisionRecord | undefined,
  waitingFor = '',
  replaced: readonly LiveTaskRecord[] = [],
  /** A server's platform and rack, when the caller knows the server. */
  serverOf: (id: string) => { platform: string; rack: string } | undefined = () => undefined,
  /** The job's one current reason (frontend/job-reason.ts): printed first. */
  reason?: Reason,
): Explanation {
  const where = (id: string): { platform?: string; rack?: string } => {
    const s = serverOf(id);
    return s ? { platform: s.platform, rack: s.rack } : {};
  };
  const records = [...(stored?.records ?? [])];
  if (live && !records.some((r) => r.startedAt === live.startedAt && r.agent === live.agent)) records.push(trimDecision(live));
  const last = records[records.length - 1];
  const sum = (f: (r: DecisionRecord) => number): number => records.reduce((a, r) => a + f(r), 0);
  const admission = records.flatMap((r, d) => r.admission.map((v) => ({ v, d })));
  const samples = records.flatMap((r, d) => r.samples.map((s) => ({ s, d })));
  const placements = records.flatMap((r, d) => r.placements.map((p) => ({ p, d })));
  const stagesOf = (m: DecisionRecord['stageMs']): NonNullable<Explanation['stages']> => ({
    admissionMs: m.admission,
    sizeMs: m.size,
    selectMs: m.select,
    commitMs: m.commit,
    queueMs: m.queue,
  });
  const e: Explanation = {
    jobId: id,
    state,
    agent: last?.agent ?? '',
    target: last?.target ?? 0,
    admission: admission.map(({ v, d }) => ({
      action: v.action,
      reason: v.reason,
      buckets: v.buckets,
      acceptableFree: v.acceptableFree,
      totalFree: v.totalFree,
      needed: v.needed,
      ...(v.estimateMs !== undefined && Number.isFinite(v.estimateMs) ? { estimateMs: v.estimateMs } : {}),
      ...(v.boundMs !== undefined && Number.isFinite(v.boundMs) ? { boundMs: v.boundMs } : {}),
      f: v.f,
      decision: d,
      ...(v.sampled ? { sampled: { drawn: v.sampled.drawn, acceptable: v.sampled.acceptable, acceptableLow: v.sampled.acceptableLow } } : {}),
    })),
    samples: samples.map(({ s, d }) => ({ r: s.R, f: s.f, candidates: s.candidates, decision: d })),
    placements: placements.map(({ p, d }) => ({
      task: p.task,
      ru: { server: p.ru.server, index: p.ru.index },
      q: p.Q,
      acceptable: p.acceptable,
      score: p.score,
      commitRevision: p.commitRevision,
      preemptedJob: p.preempted ? `${p.preempted.job}#${p.preempted.task}` : '',
      ...(p.sides
        ? {
            twoSided: true,
            selfQ: p.sides.selfQ,
            neighboursQ: p.sides.neighboursQ,
            neighbours: p.sides.neighbours,
            harmsNeighbours: p.sides.neighboursAcceptable === false,
          }
        : {}),
      ...(p.movedFrom ? { movedFrom: { server: p.movedFrom.server, index: p.movedFrom.index }, movedFromRate: p.movedFrom.rate } : {}),
      ...where(p.ru.server),
      attempt: p.attempt ?? 0,
      decision: d,
    })),
    conflicts: sum((r) => r.conflicts),
    retries: sum((r) => r.retries),
    readmissions: sum((r) => r.readmissions),
    queuedMs: sum((r) => r.queuedMs),
    decisions: records.map((r) => ({
      agent: r.agent,
      startedAtMs: r.startedAt,
      finishedAtMs: r.finishedAt ?? 0,
      conflicts: r.conflicts,
      retries: r.retries,
      readmissions: r.readmissions,
      queuedMs: r.queuedMs,
      stages: stagesOf(r.stageMs),
      placed: r.placements.length + (r.omittedPlacements ?? 0),
      placementsOmitted: r.omittedPlacements ?? 0,
      quota: r.quota ?? '',
    })),
    stages: {
      admissionMs: sum((r) => r.stageMs.admission),
      sizeMs: sum((r) => r.stageMs.size),
      selectMs: sum((r) => r.stageMs.select),
      commitMs: sum((r) => r.stageMs.commit),
      queueMs: sum((r) => r.stageMs.queue),
    },
    inProgress: stored?.inProgress === true || (live !== undefined && live.finishedAt === undefined),
    placementsOmitted: sum((r) => r.omittedPlacements ?? 0),
    waitingFor,
    replaced: replaced.slice(0, 50).map((t) => taskToProto(t)),
    ...(reason ? { reason } : {}),
    text: '',
  };
  e.text = explainText(e);
  return e;
}

/** Runs of sample attempts shown in the account (the latest ones). */
const SAMPLE_RUNS_SHOWN = 6;

/** The sample attempts, equal ones in a row folded: "R=32, f=0.000, 0 candidates ×60; …". */
export function sampleRuns(samples: readonly { r?: number; f?: number | string; candidates?: number }[]): string {
  const runs = foldRuns(samples, (x) => `${x.r ?? 0}|${Number(x.f ?? 0).toFixed(3)}|${x.candidates ?? 0}`);
  const shown = runs
    .slice(-SAMPLE_RUNS_SHOWN)
    .map(({ item: x, count }) => `R=${x.r ?? 0}, f=${Number(x.f ?? 0).toFixed(3)}, ${x.candidates ?? 0} candidates${count > 1 ? ` ×${count}` : ''}`);
  const hidden = runs.length - shown.length;
  return `${hidden > 0 ? `(${hidden} earlier run(s) of attempts not shown) ` : ''}${shown.join('; ')}`;
}

function fmtMs(ms: number): string {
  return ms >= 10_000 ? `${(ms / 1000).toFixed(1)} s` : `${ms.toFixed(ms < 10 ? 2 : 0)} ms`;
}

export function explainText(e: Explanation): string {
  const lines: string[] = [];
  if (e.reason?.text) lines.push(`now: ${e.reason.text}`);
  lines.push(
    `job ${e.jobId ?? ''}: ${e.state ?? ''}${e.inProgress ? ' (scheduling in progress)' : ''}, agent ${e.agent || '-'}, target quality T_W = ${Number(e.target ?? 0).toFixed(3)}`,
  );
  if (e.waitingFor) lines.push(`waiting for: ${e.waitingFor}`);
  const quota = [...(e.decisions ?? [])].reverse().find((d) => d.quota)?.quota;
  if (quota && quota !== e.waitingFor) lines.push(`quota: waited because ${quota}`);
  const adm = e.admission ?? [];
  if (adm.length === 0) lines.push('admission: no verdict recorded yet');
  else {
    const first = adm[0];
    const last = adm[adm.length - 1];
    for (const [label, v] of [
      ['first', first],
      ['latest', last],
    ] as const) {
      if (!v || (label === 'latest' && adm.length === 1)) continue;
      const est = v.estimateMs !== undefined ? `, estimated wait ${fmtMs(Number(v.estimateMs))}` : '';
      const bound = v.boundMs !== undefined ? ` (bound μ+2σ ${fmtMs(Number(v.boundMs))})` : '';
      lines.push(
        `admission (${label}): ${v.action ?? ''} — ${v.reason ?? ''}; ${v.acceptableFree ?? 0} of ${v.totalFree ?? 0} free RUs acceptable in buckets [${(v.buckets ?? []).join(', ')}], ${v.needed ?? 0} needed${est}${bound}`,
      );
    }
  }
  if (Number(e.queuedMs ?? 0) > 0) lines.push(`queued for ${fmtMs(Number(e.queuedMs))}`);
  const s = e.samples ?? [];
  if (s.length > 0) lines.push(`sampling: ${s.length} attempt(s), ${s.reduce((a, x) => a + (x.candidates ?? 0), 0)} candidates seen: ${sampleRuns(s)}`);
  lines.push(`commits: ${e.conflicts ?? 0} conflict(s), ${e.retries ?? 0} retr${e.retries === 1 ? 'y' : 'ies'}, ${e.readmissions ?? 0} return(s) to admission`);
  const p = e.placements ?? [];
  for (const x of p.slice(0, 50)) {
    lines.push(
      `  task ${x.task ?? 0} → ${x.ru?.server ?? '?'}/${x.ru?.index ?? '?'}  Q = ${Number(x.q ?? 0).toFixed(3)}${x.twoSided ? ` (own ${Number(x.selfQ ?? 0).toFixed(3)}, ${x.neighbours ? `worst of ${x.neighbours} neighbours ${Number(x.neighboursQ ?? 0).toFixed(3)}` : 'no residents'})` : ''}${x.acceptable ? (x.harmsNeighbours ? ' (pushes a neighbour past its tolerance)' : '') : ' (degrades the job)'}${x.preemptedJob ? `, preempted ${x.preemptedJob}` : ''}${x.movedFrom ? `, moved from ${x.movedFrom.server}/${x.movedFrom.index} (ran at ${Number(x.movedFromRate ?? 0).toFixed(2)} of its expected rate)` : ''}`,
    );
  }
  const more = p.length - Math.min(p.length, 50) + Number(e.placementsOmitted ?? 0);
  if (more > 0) lines.push(`  … ${more} more placements`);
  const again = e.replaced ?? [];
  if (again.length > 0) {
    lines.push(`placed more than once: ${again.length} task(s)${again.length >= 50 ? ' (the first 50)' : ''}`);
    for (const t of again) lines.push(...attemptLines(t));
  }
  const st = e.stages;
  if (st) {
    lines.push(
      `time per stage: admission ${fmtMs(Number(st.admissionMs ?? 0))}, sizing ${fmtMs(Number(st.sizeMs ?? 0))}, sample+select ${fmtMs(Number(st.selectMs ?? 0))}, commit ${fmtMs(Number(st.commitMs ?? 0))}, queued ${fmtMs(Number(st.queueMs ?? 0))}`,
    );
  }
  return lines.join('\n');
}
