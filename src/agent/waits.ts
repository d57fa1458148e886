/**
 * The waits of one scheduling call (attempt-context.ts): held by admission control, or waiting
 * for a freed RU it may use. Each wait is a waiter of the process's view (freed-waiters.ts) in a
 * class that says which freed RUs can wake it; the agent (AgentRuntime.waitFreed) keeps its
 * place among the waiters and wakes it when the job is aborted.
 */
import type { AdmissionVerdict } from '../admission/index.ts';
import type { JobSpec } from '../model/types.ts';
import { contention, scoreRu } from '../quality/index.ts';
import type { ServerState } from '../sampling/ru-index.ts';
import { hardPack, hardSpread, serverMatches } from '../sampling/feasibility.ts';
import { bestRoom, groupOf, groupRoom, packGroupsHeld } from '../sampling/one-group.ts';
import type { AgentRuntime } from './agent-runtime.ts';
import type { AttemptContext } from './attempt-context.ts';
import { admissionVerdict } from './core.ts';
import type { WaitClass } from './freed-waiters.ts';

/** A wait for a freed RU (waitForCapacity). */
export interface CapacityWait {
  /** At most this long (default: the agent's recheckMs). */
  ms?: number;
  /** RUs the call waits for (default 1). */
  need?: number;
  /** What the job waits for if not just a free RU (explain shows it). */
  why?: string | undefined;
  /** `why` is its namespace's quota: kept in the record as such. */
  quota?: boolean;
}

/**
 * Admission control, one verdict (the attempt loop, attempt-steps.ts, asks again after each
 * wait): queue while acceptable RUs are scarce and the estimated wait is below its bound; never
 * longer than the job's maxQueueMs. Undefined when admission is off or skipped. `want`: the tasks
 * the verdict asked about (the wait is for them).
 */
export function askAdmission(cx: AttemptContext, needed: number): { verdict: AdmissionVerdict | undefined; want: number } {
  const { agent: a, job, target, rec, at } = cx;
  if (!a.config.admission) {
    // No verdict steers the call; explain still says why the job was not held, and how the
    // acceptable RUs stood when it was first asked about.
    if (rec.admission.length === 0) rec.admission.push(admissionOff(cx, needed));
    return { verdict: undefined, want: needed };
  }
  if (at.skipAdmission(a.clock.now())) return { verdict: undefined, want: needed };
  const t0 = a.clock.monotonic();
  // An incremental job larger than the RUs it may use takes them as they come: admission
  // asks for what it can hold at once, not for all its tasks (a gang is feasible by now).
  const capacity = a.eligibleCapacity(job);
  const want = job.mode === 'gang' ? needed : Math.max(1, Math.min(needed, capacity));
  const verdict = admissionVerdict(a.core, {
    job,
    target,
    needed: want,
    cfg: a.config,
    capacity,
    leftMs: at.leftMs(a.clock.now()),
    queuedMs: at.queuedMs(a.clock.now()),
  });
  rec.stageMs.admission += a.clock.monotonic() - t0;
  rec.admission.push(verdict);
  // Keep the first verdict and the latest ones: enough to explain a long wait.
  if (rec.admission.length > 20) rec.admission.splice(1, 1);
  return { verdict, want };
}

/** What explain records for a job of an agent whose admission control is off: let through, with the buckets' count of acceptable free RUs. */
function admissionOff(cx: AttemptContext, needed: number): AdmissionVerdict {
  const F = cx.agent.core.admission.estimateF(cx.target);
  return {
    action: 'admit',
    reason: 'admission control is off (agent option admission): the job is placed at once on the best RUs its sample finds, acceptable or not',
    buckets: F.buckets,
    acceptableFree: F.acceptableFree,
    totalFree: F.totalFree,
    needed,
    f: F.f,
  };
}

/**
 * Held by admission: at most `ms`, or until a freed RU may let it in. The durable queue entry
 * lets another agent see (and, with ownership, adopt) the waiting job.
 */
export async function admissionWait(cx: AttemptContext, w: { ms: number; needed: number; want: number }): Promise<void> {
  const { agent: a, job, rec } = cx;
  await cx.waiting.ensure(w.needed);
  rec.waiting = `queued by admission control until enough free RUs would run it well (at most ${job.maxQueueMs} ms; see explain)`;
  const q0 = a.clock.now();
  await a.waitFreed(w.ms, job, admissionClass(cx, w.want), w.needed);
  delete rec.waiting;
  cx.assertOpen();
  rec.queuedMs += a.clock.now() - q0;
  rec.stageMs.queue += a.clock.now() - q0;
}

/** Waits for a freed RU (AgentRuntime.waitFreed); true when one woke the call. */
export async function waitForCapacity(cx: AttemptContext, w: CapacityWait = {}): Promise<boolean> {
  const { agent: a, job, rec } = cx;
  const { ms = a.config.recheckMs, need = 1, why, quota = false } = w;
  const q0 = a.clock.now();
  const spread = job.locality.mode === 'spread' && job.locality.required !== false;
  rec.waiting =
    why ??
    (hardPack(job.locality)
      ? packWaiting(a, job, need)
      : `waiting for a free RU it may use${spread ? ` on a ${job.locality.scope} without a task of this job (spread is required)` : ''}`);
  if (quota && why !== undefined) rec.quota = why;
  const woken = await a.waitFreed(ms, job, capacityClass(a, job, need), need);
  delete rec.waiting;
  rec.stageMs.queue += a.clock.now() - q0;
  rec.queuedMs += a.clock.now() - q0;
  cx.assertOpen();
  return woken;
}

/**
 * Jobs held by admission: woken by a freed RU they may use once enough acceptable RUs are free
 * for the verdict to admit them (`want` with its margin), counted once per freed RU for all the
 * jobs of the same target, size and constraints. With the sample arbiter on, a freed RU that is
 * itself acceptable for the job wakes it too: the buckets' means may not show it, the sample
 * the woken job takes may.
 */
function admissionClass(cx: AttemptContext, want: number): WaitClass {
  const { agent: a, job, target } = cx;
  const threshold = Math.ceil(want * a.admission.margin - 1e-9);
  const base = capacityClass(a, job);
  const arbiter = a.config.arbiterSample > 0 && !job.constraints.attributes;
  const form = a.config.qualityForm;
  const C: number[] = [];
  return {
    key: `a|${threshold}|${job.profile.caused.join(',')}|${base.key}`,
    canUse: (s, i) => base.canUse(s, i),
    ...(base.perRu ? { perRu: true } : {}),
    ready: (s) => {
      if (a.admission.estimateF(target).acceptableFree >= threshold) return true;
      if (!arbiter) return false;
      contention(s.sum, s.ruCount, null, C);
      return scoreRu(C, target, form).acceptable;
    },
  };
}

/**
 * Jobs with no eligible RU free: woken by a freed RU on a server their constraints allow (and,
 * for a required spread, where the job has no task yet); a gang only once its chunk could fit.
 */
function capacityClass(a: AgentRuntime, job: JobSpec, need = 1): WaitClass {
  const c = job.constraints;
  const key = `c|${job.mode === 'gang' ? Math.min(job.tasks, a.picksPerTxn) : 1}|${c.platforms?.join(',') ?? ''}|${c.attributes ? JSON.stringify(c.attributes) : ''}`;
  const gangNeed = job.mode === 'gang' ? Math.min(job.tasks, a.picksPerTxn) : 0;
  const ready = gangNeed > 1 ? { ready: () => a.state.available.size >= gangNeed } : {};
  if (hardPack(job.locality)) {
    // Woken only by an RU of a group with room for all it needs (its own group, once it holds one).
    const scope = job.locality.scope;
    const ok = (s: ServerState): boolean => serverMatches(s.spec, c);
    return {
      key: `${key}|pack|${job.id}|${need}`,
      perRu: true,
      canUse: (s) => {
        if (!ok(s)) return false;
        const held = packGroupsHeld(a.state, job.id, scope)[0];
        const g = groupOf(scope, s);
        if (held !== undefined && held !== g) return false;
        return groupRoom(a.state, scope === 'rack' ? (a.state.racks.get(g) ?? [s]) : [s], ok) >= need;
      },
    };
  }
  if (hardSpread(job.locality)) {
    const scope = job.locality.scope;
    return {
      key: `${key}|spread|${job.id}`,
      perRu: true,
      canUse: (s) => serverMatches(s.spec, c) && !a.state.jobGroups(job.id, scope).has(scope === 'rack' ? s.rack : s.id),
      ...ready,
    };
  }
  return { key, canUse: (s) => serverMatches(s.spec, c), ...ready };
}

/** What a required pack waits for: room for `need` tasks in one group (its own, once it holds one). */
function packWaiting(a: AgentRuntime, job: JobSpec, need: number): string {
  const scope = job.locality.scope;
  const ok = (s: ServerState): boolean => serverMatches(s.spec, job.constraints);
  const { held, room } = bestRoom(a.state, job.id, scope, ok);
  return held !== undefined
    ? `waiting for room for ${need} more of its tasks on ${scope} ${held}, where its other tasks are (pack is required): ${room} free there`
    : `waiting for a ${scope} with room for all ${need} of its tasks (pack is required): the ${scope} it may use with the most free RUs has ${room}`;
}
