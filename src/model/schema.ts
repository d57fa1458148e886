/**
 * zod schemas for the data files in profiles/ and for the job spec a user submits.
 *
 * Every check carries a human rule ("must be an integer in [0, 99]") instead of zod's default
 * wording, because these messages reach users verbatim through the CLI and the gRPC
 * INVALID_ARGUMENT status. `toIssues` turns a ZodError into `{ field, rule }` pairs with field
 * paths written the way a user would point at them (`caused[3]`, `platformPerf.c4-xlarge`).
 *
 * Checks that need the catalog (does this platform exist?) are injected through `CatalogNames`
 * so that one parse reports every problem of a spec at once.
 */
import { NAMESPACE_RULE, namespaceProblem } from '../tenancy/namespace.ts';
import { hasReservedKey, RESERVED_KEY_RULE } from '../util/dict.ts';
import { z } from 'zod';
import { DEFAULT_PRIORITY, N_RESOURCES } from './types.ts';

export const MAX_TASKS = 100_000;
export const MAX_PRIORITY = 999;
export const MAX_QUEUE_MS = 86_400_000;
export const DEFAULT_MAX_QUEUE_MS = 30_000;
/** A task longer than a week is a service in disguise; it should be resubmitted, not scheduled. */
export const MAX_DURATION_MS = 7 * 86_400_000;
export const MAX_JOB_NAME = 128;

/** Job names end up in etcd keys, logs and file names: keep them to a portable alphabet. */
export const JOB_NAME_RE = /^[A-Za-z0-9._-]+$/;
/**
 * Catalog names (resources, platforms, workloads, clusters, families): lowercase, digits and '-'.
 * No dots, so that a field path such as `platformPerf.r3-2xlarge` stays unambiguous.
 */
export const CATALOG_NAME_RE = /^[a-z0-9][a-z0-9-]{0,63}$/;
const ATTR_KEY_RE = /^[A-Za-z0-9][A-Za-z0-9._/-]{0,62}$/;
const ENV_KEY_RE = /^[A-Za-z_][A-Za-z0-9_]*$/;

// ---------------------------------------------------------------------------------------------
// Rule helpers. A missing required field says "is required" rather than repeating the range.

type RawIssue = { input?: unknown };
const rule =
  (text: string) =>
  (iss: RawIssue): string =>
    iss.input === undefined ? 'is required' : text;

const fmt = (n: number): string => String(n);

function intIn(lo: number, hi: number) {
  const r = rule(`must be an integer in [${fmt(lo)}, ${fmt(hi)}]`);
  return z.number({ error: r }).int({ error: r }).min(lo, { error: r }).max(hi, { error: r });
}

/** A finite number in (0, hi]: zod 4 already rejects NaN and ±Infinity for z.number(). */
function positiveUpTo(hi: number) {
  const r = rule(`must be a number in (0, ${fmt(hi)}]`);
  return z.number({ error: r }).positive({ error: r }).max(hi, { error: r });
}

function nonNegativeUpTo(hi: number) {
  const r = rule(`must be a number in [0, ${fmt(hi)}]`);
  return z.number({ error: r }).min(0, { error: r }).max(hi, { error: r });
}

function text(maxLen: number) {
  const r = rule(`must be a string of at most ${fmt(maxLen)} characters`);
  return z.string({ error: r }).max(maxLen, { error: r });
}

function nonEmptyText(maxLen: number) {
  const r = rule(`must be a non-empty string of at most ${fmt(maxLen)} characters`);
  return z.string({ error: r }).min(1, { error: r }).max(maxLen, { error: r });
}

const catalogName = (() => {
  const r = rule('must be 1-64 characters of a-z, 0-9 and -, starting with a letter or digit');
  return z.string({ error: r }).regex(CATALOG_NAME_RE, { error: r });
})();

const jobName = (() => {
  const r = rule(`must be 1-${fmt(MAX_JOB_NAME)} characters of A-Z, a-z, 0-9, '.', '_' and '-'`);
  return z.string({ error: r }).min(1, { error: r }).max(MAX_JOB_NAME, { error: r }).regex(JOB_NAME_RE, { error: r });
})();

const bool = z.boolean({ error: rule('must be true or false') });

function strictObj<T extends z.core.$ZodLooseShape>(shape: T) {
  return z.strictObject(shape, { error: rule('must be an object') });
}

function arrayOf<T extends z.ZodType>(item: T) {
  return z.array(item, { error: rule('must be an array') });
}

/**
 * A map keyed by names the user chose. zod's record skips a key `__proto__` without checking it
 * (it cannot copy it into the plain object it builds), so a map holding one would lose it without
 * a word: such a map is refused here, naming the map and the rule (util/dict.ts).
 */
export function userRecord<K extends z.core.$ZodRecordKey, V extends z.core.SomeType>(key: K, value: V, error: string) {
  const record = z.record(key, value, { error: rule(error) });
  return z.preprocess<unknown, typeof record, z.input<typeof record>>((v, ctx) => {
    if (hasReservedKey(v)) ctx.addIssue({ code: 'custom', message: RESERVED_KEY_RULE, input: v });
    return v;
  }, record);
}

/** Server attributes (zone, ssd, ...) and constraint attributes share one shape. */
export const attributesSchema = userRecord(
  z.string().regex(ATTR_KEY_RE, { error: 'attribute names must be 1-63 characters of A-Z, a-z, 0-9, ".", "_", "/" and "-"' }),
  text(256),
  'must be an object mapping attribute names to strings',
);

/** The caused-interference vector, in the order of resources.json (paper §3.2). */
export const causedSchema = arrayOf(intIn(0, 99)).length(N_RESOURCES, {
  error: `must have exactly ${fmt(N_RESOURCES)} entries, one per resource in resources.json`,
});

/** Relative performance per platform; 100× the reference would be a data-entry error. */
const perfValue = positiveUpTo(100);
export const platformPerfSchema = userRecord(catalogName, perfValue, 'must be an object mapping platform names to relative performance');

// ---------------------------------------------------------------------------------------------
// Data files

function uniqueBy<T>(items: readonly T[], key: (t: T) => string, field: string, ctx: z.core.$RefinementCtx<unknown>): void {
  const seen = new Map<string, number>();
  items.forEach((item, i) => {
    const k = key(item);
    const first = seen.get(k);
    if (first === undefined) seen.set(k, i);
    else ctx.addIssue({ code: 'custom', path: [i, field], message: `duplicates entry ${fmt(first)} ('${k}')`, input: k });
  });
}

export const resourceSchema = strictObj({
  id: catalogName,
  name: nonEmptyText(64),
  description: text(2000),
});

export const resourcesFileSchema = strictObj({
  description: text(4000).optional(),
  resources: arrayOf(resourceSchema)
    .length(N_RESOURCES, { error: `must list exactly ${fmt(N_RESOURCES)} resources (N = ${fmt(N_RESOURCES)}, paper §3.2)` })
    .superRefine((rs, ctx) => uniqueBy(rs, (r) => r.id, 'id', ctx)),
});

export const platformSchema = strictObj({
  name: catalogName,
  description: text(2000),
  cores: intIn(1, 4096),
  speed: positiveUpTo(100),
  memoryGiB: positiveUpTo(1_048_576),
  storageGiB: nonNegativeUpTo(1_048_576_000),
  networkGbps: positiveUpTo(100_000),
});

export const platformsFileSchema = strictObj({
  description: text(4000).optional(),
  reference: catalogName,
  platforms: arrayOf(platformSchema)
    .min(1, { error: 'must list at least one platform' })
    .superRefine((ps, ctx) => uniqueBy(ps, (p) => p.name, 'name', ctx)),
}).superRefine((f, ctx) => {
  const ref = f.platforms.find((p) => p.name === f.reference);
  if (!ref) {
    ctx.addIssue({ code: 'custom', path: ['reference'], message: `must name a platform listed in platforms ('${f.reference}' is not)`, input: f.reference });
  } else if (ref.speed !== 1) {
    // platformPerf and speed are both relative to this platform; any other speed makes them disagree.
    const i = f.platforms.indexOf(ref);
    ctx.addIssue({ code: 'custom', path: ['platforms', i, 'speed'], message: 'must be 1 on the reference platform', input: ref.speed });
  }
});

export const workloadProfileSchema = strictObj({
  name: catalogName,
  description: text(4000),
  family: catalogName,
  caused: causedSchema,
  platformPerf: platformPerfSchema,
  typicalDurationMs: positiveUpTo(MAX_DURATION_MS),
  latencyCritical: bool,
});

export const serverGroupSchema = strictObj({
  platform: catalogName,
  count: intIn(1, 1_000_000),
  attributes: attributesSchema.optional(),
});

export const clusterSpecSchema = strictObj({
  name: catalogName,
  description: text(4000),
  serversPerRack: intIn(1, 100_000),
  groups: arrayOf(serverGroupSchema).min(1, { error: 'must list at least one server group' }),
});

// ---------------------------------------------------------------------------------------------
// Job spec input

/** What the job-spec schema needs to know about the catalog to reject unknown names. */
export interface CatalogNames {
  hasPlatform(name: string): boolean;
  hasWorkload(name: string): boolean;
  platformNames(): string[];
  workloadNames(): string[];
}

function listForMessage(names: string[]): string {
  const shown = names.slice(0, 20).join(', ');
  return names.length > 20 ? `${shown}, ...` : shown;
}

export function makeJobSpecSchema(names?: CatalogNames) {
  const knownPlatform = catalogName.superRefine((p, ctx) => {
    if (names && !names.hasPlatform(p)) {
      ctx.addIssue({ code: 'custom', message: `unknown platform '${p}' (known: ${listForMessage(names.platformNames())})`, input: p });
    }
  });

  const profileRef = z.string().superRefine((p, ctx) => {
    if (names && !names.hasWorkload(p)) {
      ctx.addIssue({ code: 'custom', message: `unknown workload profile '${p}' (known: ${listForMessage(names.workloadNames())})`, input: p });
    }
  });

  /**
   * An inline profile needs only its interference vector. Omitted platforms are filled in by the
   * catalog (see parseJobSpec) so that a user need not list every server type.
   */
  const inlineProfile = strictObj({
    name: jobName.optional(),
    description: text(4000).optional(),
    family: catalogName.optional(),
    caused: causedSchema,
    platformPerf: userRecord(knownPlatform, perfValue, 'must be an object mapping platform names to relative performance').optional(),
    typicalDurationMs: positiveUpTo(MAX_DURATION_MS).optional(),
    latencyCritical: bool.optional(),
  });

  const locality = strictObj({
    mode: z.enum(['any', 'pack', 'spread'], { error: rule("must be 'any', 'pack' or 'spread'") }).default('any'),
    scope: z.enum(['server', 'rack'], { error: rule("must be 'server' or 'rack'") }).default('server'),
    required: bool.optional(),
  });

  const constraints = strictObj({
    platforms: arrayOf(knownPlatform).min(1, { error: 'must list at least one platform (omit it to allow all)' }).optional(),
    attributes: attributesSchema.optional(),
    dataServers: arrayOf(nonEmptyText(128)).max(10_000, { error: 'must list at most 10000 servers' }).optional(),
  });

  const argRule = rule('must be a string without NUL characters');
  const command = strictObj({
    argv: arrayOf(
      z
        .string({ error: argRule })
        .max(65_536, { error: 'must be at most 65536 characters' })
        .refine((s) => !s.includes('\0'), { error: argRule }),
    )
      .min(1, { error: 'must have at least one element (the program)' })
      .refine((a) => a[0] !== '', { error: 'must not start with an empty program name' }),
    env: userRecord(
      z.string().regex(ENV_KEY_RE, { error: 'environment variable names must match [A-Za-z_][A-Za-z0-9_]*' }),
      z
        .string({ error: argRule })
        .max(65_536, { error: 'must be at most 65536 characters' })
        .refine((s) => !s.includes('\0'), { error: argRule }),
      'must be an object mapping variable names to strings',
    ).optional(),
  });

  return strictObj({
    name: jobName,
    profile: z.union([profileRef, inlineProfile], {
      error: rule('must be a workload profile name or an inline profile object'),
    }),
    tasks: intIn(1, MAX_TASKS),
    priority: intIn(0, MAX_PRIORITY).default(DEFAULT_PRIORITY),
    mode: z.enum(['incremental', 'gang'], { error: rule("must be 'incremental' or 'gang'") }).default('incremental'),
    locality: locality.default({ mode: 'any', scope: 'server' }),
    constraints: constraints.default({}),
    maxQueueMs: intIn(0, MAX_QUEUE_MS).default(DEFAULT_MAX_QUEUE_MS),
    durationMs: positiveUpTo(MAX_DURATION_MS).optional(),
    command: command.optional(),
    migratable: z.boolean({ error: rule('must be true or false') }).default(false),
    scaleOut: strictObj({ maxTasks: intIn(1, MAX_TASKS) }).optional(),
    namespace: z
      .string({ error: rule(NAMESPACE_RULE) })
      .refine((n) => namespaceProblem(n) === undefined, { error: NAMESPACE_RULE })
      .optional(),
  })
    .refine((s) => hasDurationOrCommand(s), {
      path: ['durationMs'],
      error: DURATION_OR_COMMAND,
      when: (payload) => isRecord(payload.value),
    })
    .refine((s) => !s.scaleOut || s.scaleOut.maxTasks >= s.tasks, {
      path: ['scaleOut', 'maxTasks'],
      error: 'must be at least tasks (the job grows from tasks up to maxTasks)',
    })
    .refine((s) => !s.scaleOut || s.mode !== 'gang', {
      path: ['scaleOut'],
      error: "is not allowed with mode 'gang' (a gang's tasks are placed all at once)",
    })
    .refine((s) => !(s.locality.mode === 'pack' && s.locality.required === true) || s.mode === 'gang', {
      path: ['locality', 'required'],
      error:
        "true with mode 'pack' puts every task on one server (or rack), all or nothing: it needs mode 'gang' (or set locality.required to false to make pack a preference)",
    });
}

const DURATION_OR_COMMAND = 'is required unless command is given (a simulated task needs a duration, a real one a command)';

function hasDurationOrCommand(s: Record<string, unknown>): boolean {
  return s.durationMs !== undefined || s.command !== undefined;
}

/** The job-spec schema without catalog checks: profile and platform names are not looked up. */
export const jobSpecInputSchema = makeJobSpecSchema();

/** A job spec as a user writes it (defaults optional). */
export type JobSpecInput = z.input<typeof jobSpecInputSchema>;
/** A job spec after validation and defaults, before the profile is resolved. */
export type JobSpecParsed = z.output<typeof jobSpecInputSchema>;
export type InlineProfileInput = Exclude<JobSpecParsed['profile'], string>;

export type ResourcesFile = z.output<typeof resourcesFileSchema>;
export type PlatformsFile = z.output<typeof platformsFileSchema>;

// ---------------------------------------------------------------------------------------------
// Issues

/** One problem: where (a user-facing field path) and which rule it breaks. */
export interface Issue {
  field: string;
  rule: string;
}

export function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

const PLAIN_KEY_RE = /^[A-Za-z0-9_-]+$/;

/** `['caused', 3]` → `caused[3]`; `['platformPerf', 'c4-xlarge']` → `platformPerf.c4-xlarge`. */
export function formatPath(path: readonly PropertyKey[]): string {
  let out = '';
  for (const seg of path) {
    if (typeof seg === 'number') out += `[${fmt(seg)}]`;
    else {
      const s = String(seg);
      if (PLAIN_KEY_RE.test(s)) out += out === '' ? s : `.${s}`;
      else out += `[${JSON.stringify(s)}]`;
    }
  }
  return out === '' ? '(root)' : out;
}

/** Flattens zod issues into user-facing ones, without duplicates. */
export function toIssues(issues: readonly z.core.$ZodIssue[]): Issue[] {
  return dedupeIssues(flatten(issues, []));
}

function flatten(issues: readonly z.core.$ZodIssue[], prefix: readonly PropertyKey[]): Issue[] {
  const out: Issue[] = [];
  for (const iss of issues) {
    const path = [...prefix, ...iss.path];
    switch (iss.code) {
      case 'unrecognized_keys':
        for (const k of iss.keys) out.push({ field: formatPath([...path, k]), rule: 'is not a known field' });
        break;
      case 'invalid_key':
        out.push(...flatten(iss.issues, path));
        break;
      case 'invalid_union': {
        const branch = pickUnionBranch(iss);
        if (branch) out.push(...flatten(branch, path));
        else out.push({ field: formatPath(path), rule: iss.message });
        break;
      }
      default:
        out.push({ field: formatPath(path), rule: iss.message });
    }
  }
  return out;
}

/**
 * For `string | object` unions zod reports both branches' failures. The branch the user meant is
 * the one whose failure is not "this is not even the right type" at the union's own position.
 */
function pickUnionBranch(iss: z.core.$ZodIssueInvalidUnion): z.core.$ZodIssue[] | undefined {
  const meant = iss.errors.filter((errs) => !errs.some((e) => e.path.length === 0 && e.code === 'invalid_type'));
  return meant.length === 1 ? meant[0] : undefined;
}

export type JobSpecResult = { ok: true; value: JobSpecParsed } | { ok: false; issues: Issue[] };

/**
 * Validates a job spec and returns every problem. zod skips object-level refinements once a field
 * has failed a check that aborts (such as `int`), so the duration-or-command rule is also checked
 * here directly: one round trip should show the user everything that is wrong.
 */
export function validateJobSpec(input: unknown, schema: ReturnType<typeof makeJobSpecSchema> = jobSpecInputSchema): JobSpecResult {
  const r = schema.safeParse(input);
  if (r.success) return { ok: true, value: r.data };
  const issues = toIssues(r.error.issues);
  if (isRecord(input) && !hasDurationOrCommand(input)) issues.push({ field: 'durationMs', rule: DURATION_OR_COMMAND });
  return { ok: false, issues: dedupeIssues(issues) };
}

export function dedupeIssues(issues: readonly Issue[]): Issue[] {
  const seen = new Set<string>();
  return issues.filter((i) => {
    const k = `${i.field}\0${i.rule}`;
    if (seen.has(k)) return false;
    seen.add(k);
    return true;
  });
}

/** `field: rule; field: rule` — the form used in every validation message. */
export function describeIssues(issues: readonly Issue[]): string {
  return issues.map((i) => `${i.field}: ${i.rule}`).join('; ');
}
