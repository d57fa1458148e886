/**
 * Learned profiles in the store (`profiles/<name>`): what the node monitors saw of each workload
 * class, folded into the class's estimate by the profile learner (model/learn.ts).
 *
 * A monitor measures, over each task's run, its mean share of the expected rate and the mean
 * pressure of its neighbours (their scheduling vectors); the outcome it records carries both
 * (`observed` on the task record). The job's owner hands the observation to its front-end's book,
 * which every few seconds applies what it gathered to the stored estimate of each class, all
 * classes in one transaction fenced on each record's revision as last seen (retried on what the
 * failure branch read when another front-end wrote first): the estimate is shared by the whole
 * cell and survives restarts, and no observation is applied twice or lost to a race.
 *
 * With `use: 'learned'`, jobs submitted later are scheduled with the learned vector of their class
 * once it rests on `minObservations` observations; with `use: 'declared'` they keep the declared
 * ones. The default follows DEFAULT_RUNTIME.learn (src/monitor/runtime-loop.ts, the simulator's
 * default too); `tarcil server --profiles` chooses. Observations are gathered and written to the
 * store either way: a front-end that uses learned profiles finds what the others saw.
 */
import type { JobSpec } from '../model/types.ts';
import { ProfileLearner, type StoredEstimate } from '../model/learn.ts';
import { DEFAULT_RUNTIME } from '../monitor/runtime-loop.ts';
import type { ClusterStore } from '../store/types.ts';
import type { Clock } from '../util/clock.ts';
import { errorMessage } from '../util/errors.ts';
import type { Logger } from '../util/log.ts';
import type { Keys } from './keys.ts';
import { parseJson } from './records.ts';

/** The value of `profiles/<name>`. */
export interface StoredProfile extends StoredEstimate {
  name: string;
  updatedAt: number;
}

/** What a monitor measured over one task's run (the task record's `observed`). */
export interface TaskObservation {
  /** Mean share of the expected rate (1: as fast as alone on its platform). */
  share: number;
  /** Mean pressure of the neighbours on each resource, C_i (their vectors over M − 1). */
  pressure: number[];
  /** Milliseconds of the run the means cover (time alone on the server does not count). */
  ms: number;
}

export interface ProfileBookOptions {
  store: ClusterStore;
  keys: Keys;
  clock: Clock;
  log: Logger;
  /**
   * 'learned': schedule with the learned vector once it rests on enough observations; 'declared':
   * with the job's own. Default {@link DEFAULT_PROFILE_USE} (DEFAULT_RUNTIME.learn).
   */
  use?: ProfileUse;
  /** Observations a class needs before its learned vector is used (default 20). */
  minObservations?: number;
  /** How often gathered observations are written (default 5 s). */
  flushMs?: number;
}

/** Which profiles new jobs are scheduled with. */
export type ProfileUse = 'learned' | 'declared';
/** Learning is one of the run-time loop's parts: on exactly when DEFAULT_RUNTIME says so, live and simulated alike. */
export const DEFAULT_PROFILE_USE: ProfileUse = DEFAULT_RUNTIME.learn ? 'learned' : 'declared';

export const DEFAULT_MIN_OBSERVATIONS = 20;
export const DEFAULT_PROFILE_FLUSH_MS = 5000;
/** Tries of a flush's transaction before its observations wait for the next flush. */
const TRIES = 5;

export class ProfileBook {
  private readonly learner = new ProfileLearner();
  private readonly pending = new Map<string, { declared: readonly number[]; obs: TaskObservation[] }>();
  private readonly use: ProfileUse;
  readonly minObservations: number;
  readonly flushMs: number;
  /** Each class's stored record as this book last saw it (read or written), and its revision. */
  private readonly seen = new Map<string, { rec: StoredProfile; rev: number }>();
  private flushing: Promise<void> | undefined;
  /** Observations written to the store by this process, and flushes that hit a race (retried). */
  readonly stats = { observed: 0, written: 0, races: 0 };

  constructor(private readonly o: ProfileBookOptions) {
    this.use = o.use ?? DEFAULT_PROFILE_USE;
    this.minObservations = o.minObservations ?? DEFAULT_MIN_OBSERVATIONS;
    this.flushMs = o.flushMs ?? DEFAULT_PROFILE_FLUSH_MS;
  }

  /** A finished task's observation, for its job's class (applied at the next flush). */
  observe(spec: JobSpec, obs: TaskObservation): void {
    if (!(obs.share > 0) || !Number.isFinite(obs.share) || obs.pressure.length !== spec.profile.caused.length) return;
    const name = spec.profile.name;
    let p = this.pending.get(name);
    if (!p) this.pending.set(name, (p = { declared: declaredOf(spec), obs: [] }));
    p.obs.push(obs);
    this.stats.observed++;
  }

  /** New jobs are scheduled with learned vectors (once they rest on minObservations). */
  get usesLearned(): boolean {
    return this.use === 'learned';
  }

  /** Classes with observations not yet written. */
  get pendingClasses(): number {
    return this.pending.size;
  }

  /**
   * Applies what was gathered to the stored estimates, then refreshes every class from the store
   * (what other front-ends learned). One transaction for every class with observations, fenced on
   * each record's revision as this book last saw it (its last write, its last refresh; absent
   * when it has never seen one): when another front-end wrote one first, the failure branch reads
   * them all back and the next try applies the same observations to what it read. Two requests
   * a flush, however many classes. Store errors leave the observations for the next flush.
   */
  async flush(): Promise<void> {
    // One flush at a time: a timer's flush that finds the last one still running waits for it.
    if (this.flushing) return this.flushing;
    this.flushing = (async () => {
      const per = Math.max(1, Math.floor(this.o.store.maxTxnOps / 2));
      const names = [...this.pending.keys()];
      for (let i = 0; i < names.length; i += per) await this.flushSome(names.slice(i, i + per));
      await this.refresh();
    })().finally(() => {
      this.flushing = undefined;
    });
    return this.flushing;
  }

  /**
   * Writes the observations of these classes gathered so far. They are taken out of `pending`
   * first, so that what arrives while the write is in flight waits for the next flush instead of
   * going with the record that did not apply it; they go back if the write fails.
   */
  private async flushSome(names: string[]): Promise<void> {
    const taken = new Map<string, { declared: readonly number[]; obs: TaskObservation[] }>();
    for (const name of names) {
      const p = this.pending.get(name);
      if (!p) continue;
      taken.set(name, p);
      this.pending.delete(name);
    }
    for (let t = 0; t < TRIES; t++) {
      const puts: { name: string; key: string; rec: StoredProfile; n: number }[] = [];
      for (const [name, p] of taken) {
        const cur = this.seen.get(name)?.rec;
        if (cur) this.learner.load(name, cur);
        else this.learner.forget(name);
        for (const x of p.obs) this.learner.observe(name, cur?.declared ?? p.declared, x.pressure, x.share);
        const est = this.learner.export(name);
        if (est) puts.push({ name, key: this.o.keys.profile(name), rec: { name, ...est, updatedAt: this.o.clock.now() }, n: p.obs.length });
      }
      if (puts.length === 0) break;
      try {
        const res = await this.o.store.txn({
          compare: puts.map((x) => ({ key: x.key, target: 'mod' as const, op: '==' as const, value: this.seen.get(x.name)?.rev ?? 0 })),
          success: puts.map((x) => ({ type: 'put' as const, key: x.key, value: JSON.stringify(x.rec) })),
          failure: puts.map((x) => ({ type: 'get' as const, key: x.key })),
        });
        if (res.succeeded) {
          for (const x of puts) {
            this.seen.set(x.name, { rec: x.rec, rev: res.revision });
            this.stats.written += x.n;
            taken.delete(x.name);
          }
          break;
        }
        this.stats.races++;
        puts.forEach((x, k) => {
          const kv = res.responses[k]?.[0];
          const rec = parseJson<StoredProfile>(kv);
          if (kv && rec) this.seen.set(x.name, { rec, rev: kv.modRevision });
          else this.seen.delete(x.name);
        });
      } catch (err) {
        this.o.log.warn({ profiles: puts.map((x) => x.name), err: errorMessage(err) }, 'could not write learned profiles; will retry');
        break;
      }
    }
    // Not written (a failed write, or a class with no estimate yet): back into pending, before what arrived meanwhile.
    for (const [name, p] of taken) {
      const now = this.pending.get(name);
      this.pending.set(name, { declared: p.declared, obs: now ? p.obs.concat(now.obs) : p.obs });
    }
  }

  /** Loads every stored estimate (another front-end's writes, or a previous life's). */
  async refresh(): Promise<void> {
    try {
      const res = await this.o.store.range(this.o.keys.profiles());
      for (const kv of res.kvs) {
        const rec = parseJson<StoredProfile>(kv);
        if (!rec?.name) continue;
        this.seen.set(rec.name, { rec, rev: kv.modRevision });
        if (!this.pending.has(rec.name)) this.learner.load(rec.name, rec);
      }
    } catch {
      // the next flush reads them again
    }
  }

  /**
   * The spec a job is scheduled with: its class's learned vector once that rests on enough
   * observations (the declared one is kept in `learned.declared`), else the spec unchanged.
   */
  schedulingSpec(spec: JobSpec): JobSpec {
    if (this.use !== 'learned') return spec;
    const name = spec.profile.name;
    const n = this.learner.observations(name);
    if (n < this.minObservations) return spec;
    const declared = declaredOf(spec);
    const v = this.learner.vector(name, declared);
    if (v === declared) return spec;
    return { ...spec, profile: { ...spec.profile, caused: [...v] }, learned: { observations: n, declared: [...declared] } };
  }
}

/** The class's declared vector (a job scheduled with a learned one keeps it). */
export function declaredOf(spec: JobSpec): readonly number[] {
  return spec.learned?.declared ?? spec.profile.caused;
}

/** One class's stored estimate (undefined: never observed). */
export async function readProfile(store: ClusterStore, keys: Keys, name: string): Promise<StoredProfile | undefined> {
  return parseJson<StoredProfile>(await store.get(keys.profile(name)));
}
