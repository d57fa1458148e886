/**
 * Loads and cross-checks the data in profiles/: resources, platforms, workload profiles and
 * cluster specs; expands clusters into servers; turns a submitted job spec into a JobSpec.
 *
 * Validation collects every problem before failing: one TarcilError('INVALID_ARGUMENT') whose
 * message names each file, field path and rule, so a broken catalog is fixed in one pass rather
 * than one error per restart.
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { basename, dirname, extname, join, resolve } from 'node:path';
import { packageRoot } from '../util/package-root.ts';
import type { z } from 'zod';
import { dict, hasOwnKey, own } from '../util/dict.ts';
import { errorMessage, invalid, TarcilError } from '../util/errors.ts';
import {
  clusterSpecSchema,
  describeIssues,
  isRecord,
  makeJobSpecSchema,
  platformsFileSchema,
  resourcesFileSchema,
  toIssues,
  validateJobSpec,
  workloadProfileSchema,
  type CatalogNames,
  type InlineProfileInput,
  type Issue,
} from './schema.ts';
import type { ClusterSpec, JobSpec, Platform, Resource, ServerSpec, WorkloadProfile } from './types.ts';

export interface Catalog {
  /** The directory the catalog was loaded from (absolute). */
  dir: string;
  /** In the order of every `caused` vector. */
  resources: Resource[];
  /** In file order. */
  platforms: Map<string, Platform>;
  /** The platform whose speed and platformPerf are 1 by definition. */
  referencePlatform: string;
  /** Sorted by name. Profiles are frozen: jobs share them. */
  workloads: Map<string, WorkloadProfile>;
  /** Sorted by name. */
  clusters: Map<string, ClusterSpec>;
}

/** A problem located in a file (or in a submitted spec when `file` is undefined). */
interface FileIssue extends Issue {
  file?: string;
}

function failure(what: string, issues: readonly FileIssue[], cause?: unknown): TarcilError {
  const byFile = new Map<string | undefined, Issue[]>();
  for (const i of issues) {
    const list = byFile.get(i.file) ?? [];
    list.push({ field: i.field, rule: i.rule });
    byFile.set(i.file, list);
  }
  const lines = [...byFile].map(([file, list]) => `${file === undefined ? '' : `${file}: `}invalid ${what}: ${describeIssues(list)}`);
  const first = issues[0];
  return new TarcilError('INVALID_ARGUMENT', lines.join('\n'), {
    field: first?.field ?? '(root)',
    details: { issues: issues.map((i) => ({ ...i })) },
    ...(cause === undefined ? {} : { cause }),
  });
}

// ---------------------------------------------------------------------------------------------
// Reading files

type Parsed<T> = { ok: true; value: T } | { ok: false; issues: FileIssue[] };

function readJson(file: string): Parsed<unknown> {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (e) {
    const code = isRecord(e) && typeof e.code === 'string' ? e.code : 'read error';
    return { ok: false, issues: [{ file, field: '(file)', rule: `cannot be read (${code})` }] };
  }
  try {
    return { ok: true, value: JSON.parse(text) as unknown };
  } catch (e) {
    const msg = errorMessage(e);
    return { ok: false, issues: [{ file, field: '(file)', rule: `is not valid JSON (${msg})` }] };
  }
}

function parseWith<T>(schema: z.ZodType<T>, file: string, raw: unknown): Parsed<T> {
  const r = schema.safeParse(raw);
  if (r.success) return { ok: true, value: r.data };
  return { ok: false, issues: toIssues(r.error.issues).map((i) => ({ file, ...i })) };
}

function readFileAs<T>(schema: z.ZodType<T>, file: string): Parsed<T> {
  const raw = readJson(file);
  return raw.ok ? parseWith(schema, file, raw.value) : raw;
}

function jsonFilesIn(dir: string): string[] {
  if (!existsSync(dir)) return [];
  return readdirSync(dir)
    .filter((f) => f.endsWith('.json'))
    .sort()
    .map((f) => join(dir, f));
}

const stem = (file: string): string => basename(file, extname(file));

// ---------------------------------------------------------------------------------------------
// Cross-file checks

function checkPerfCoverage(perf: Record<string, number>, platforms: ReadonlyMap<string, Platform>, file: string | undefined): FileIssue[] {
  const issues: FileIssue[] = [];
  for (const name of platforms.keys()) {
    if (!hasOwnKey(perf, name)) issues.push({ file, field: `platformPerf.${name}`, rule: 'is missing (every platform in platforms.json needs a value)' });
  }
  for (const name of Object.keys(perf)) {
    if (!platforms.has(name)) issues.push({ file, field: `platformPerf.${name}`, rule: 'is not a platform in platforms.json' });
  }
  return issues;
}

function checkGroupPlatforms(spec: ClusterSpec, platforms: ReadonlyMap<string, Platform>, file: string | undefined): FileIssue[] {
  const issues: FileIssue[] = [];
  spec.groups.forEach((g, i) => {
    if (!platforms.has(g.platform)) issues.push({ file, field: `groups[${i}].platform`, rule: `'${g.platform}' is not a platform in platforms.json` });
  });
  return issues;
}

function checkNameMatchesFile(name: string, file: string): FileIssue[] {
  // The name is how profiles and clusters are referenced; tying it to the file keeps lookups obvious.
  return name === stem(file) ? [] : [{ file, field: 'name', rule: `must match the file name ('${stem(file)}')` }];
}

/** A profile jobs share: frozen, its platformPerf keyed by platform name without a prototype. */
function freezeProfile(p: WorkloadProfile): WorkloadProfile {
  Object.freeze(p.caused);
  p.platformPerf = Object.freeze(dict(p.platformPerf));
  return Object.freeze(p);
}

// ---------------------------------------------------------------------------------------------
// Catalog

/** The environment variable that names another profiles directory for every tarcil process. */
export const PROFILES_ENV = 'TARCIL_PROFILES';

/**
 * The catalog's directory: $TARCIL_PROFILES when set (a cell whose platforms the package's
 * catalog does not name, e.g. one built from a production trace, gives all its processes the
 * same directory), else the package's profiles/ directory (see packageRoot: the same from src/
 * and from dist/).
 */
export function defaultProfilesDir(): string {
  const env = process.env[PROFILES_ENV];
  if (env !== undefined && env !== '') {
    const dir = resolve(env);
    if (!existsSync(join(dir, 'platforms.json')))
      throw new TarcilError('INVALID_ARGUMENT', `${PROFILES_ENV}: must name a profiles directory holding platforms.json, is '${env}'`, { field: PROFILES_ENV });
    return dir;
  }
  const dir = join(packageRoot(), 'profiles');
  if (!existsSync(join(dir, 'platforms.json'))) throw new TarcilError('NOT_FOUND', `no profiles/platforms.json in ${dirname(dir)}`);
  return dir;
}

export function loadCatalog(dir?: string): Catalog {
  const root = resolve(dir ?? defaultProfilesDir());
  if (!existsSync(root) || !statSync(root).isDirectory()) {
    throw new TarcilError('INVALID_ARGUMENT', `${root}: profiles directory not found`, { field: 'dir' });
  }
  const issues: FileIssue[] = [];

  const resFile = join(root, 'resources.json');
  const res = readFileAs(resourcesFileSchema, resFile);
  if (!res.ok) issues.push(...res.issues);

  const platFile = join(root, 'platforms.json');
  const plat = readFileAs(platformsFileSchema, platFile);
  let platforms: Map<string, Platform> | undefined;
  if (plat.ok) platforms = new Map(plat.value.platforms.map((p) => [p.name, p]));
  else issues.push(...plat.issues);

  const workloads = new Map<string, WorkloadProfile>();
  for (const file of jsonFilesIn(join(root, 'workloads'))) {
    const w = readFileAs(workloadProfileSchema, file);
    if (!w.ok) {
      issues.push(...w.issues);
      continue;
    }
    // Without a valid platforms.json, coverage errors would only be noise.
    const cross = [...checkNameMatchesFile(w.value.name, file), ...(platforms ? checkPerfCoverage(w.value.platformPerf, platforms, file) : [])];
    if (cross.length > 0) issues.push(...cross);
    else workloads.set(w.value.name, freezeProfile(w.value));
  }

  const clusters = new Map<string, ClusterSpec>();
  for (const file of jsonFilesIn(join(root, 'clusters'))) {
    const c = readFileAs(clusterSpecSchema, file);
    if (!c.ok) {
      issues.push(...c.issues);
      continue;
    }
    const cross = [...checkNameMatchesFile(c.value.name, file), ...(platforms ? checkGroupPlatforms(c.value, platforms, file) : [])];
    if (cross.length > 0) issues.push(...cross);
    else clusters.set(c.value.name, c.value);
  }

  if (issues.length > 0 || !res.ok || !plat.ok || !platforms) throw failure('profile data', issues);
  return {
    dir: root,
    resources: res.value.resources,
    platforms,
    referencePlatform: plat.value.reference,
    workloads,
    clusters,
  };
}

// ---------------------------------------------------------------------------------------------
// Single files and name-or-path resolution (CLI flags such as --cluster and --profile)

/** Reads one cluster spec. With `platforms`, its groups must reference known platforms. */
export function loadClusterFile(path: string, platforms?: ReadonlyMap<string, Platform>): ClusterSpec {
  const c = readFileAs(clusterSpecSchema, path);
  if (!c.ok) throw failure('cluster spec', c.issues);
  const cross = platforms ? checkGroupPlatforms(c.value, platforms, path) : [];
  if (cross.length > 0) throw failure('cluster spec', cross);
  return c.value;
}

/** Reads one workload profile. With `platforms`, its platformPerf must cover exactly them. */
export function loadWorkloadFile(path: string, platforms?: ReadonlyMap<string, Platform>): WorkloadProfile {
  const w = readFileAs(workloadProfileSchema, path);
  if (!w.ok) throw failure('workload profile', w.issues);
  const cross = platforms ? checkPerfCoverage(w.value.platformPerf, platforms, path) : [];
  if (cross.length > 0) throw failure('workload profile', cross);
  return freezeProfile(w.value);
}

const looksLikePath = (s: string): boolean => s.includes('/') || s.includes('\\') || s.endsWith('.json');

export function resolveCluster(nameOrPath: string, catalog: Catalog): ClusterSpec {
  const named = catalog.clusters.get(nameOrPath);
  if (named) return named;
  if (looksLikePath(nameOrPath)) return loadClusterFile(nameOrPath, catalog.platforms);
  throw new TarcilError(
    'INVALID_ARGUMENT',
    `cluster: unknown cluster '${nameOrPath}' (known: ${[...catalog.clusters.keys()].join(', ')}; or give a path to a .json file)`,
    { field: 'cluster' },
  );
}

export function resolveProfile(nameOrPath: string, catalog: Catalog): WorkloadProfile {
  const named = catalog.workloads.get(nameOrPath);
  if (named) return named;
  if (looksLikePath(nameOrPath)) return loadWorkloadFile(nameOrPath, catalog.platforms);
  throw new TarcilError(
    'INVALID_ARGUMENT',
    `profile: unknown workload profile '${nameOrPath}' (known: ${[...catalog.workloads.keys()].join(', ')}; or give a path to a .json file)`,
    { field: 'profile' },
  );
}

// ---------------------------------------------------------------------------------------------
// Clusters

function pad(n: number, width: number): string {
  return String(n).padStart(width, '0');
}

/**
 * The same cluster with `servers` servers: each group's count scaled in proportion (largest
 * remainders first, so the counts add up exactly; a group may fall to zero and is then left
 * out). The mix of platforms, zones and attributes stays; `tarcil hollow --servers` uses it.
 */
export function scaleCluster(spec: ClusterSpec, servers: number): ClusterSpec {
  if (!Number.isInteger(servers) || servers < 1) throw invalid('servers', `must be a positive integer (got ${servers})`);
  const total = spec.groups.reduce((n, g) => n + g.count, 0);
  if (servers === total) return spec;
  const exact = spec.groups.map((g) => (g.count * servers) / total);
  const counts = exact.map(Math.floor);
  let left = servers - counts.reduce((a, b) => a + b, 0);
  const order = exact.map((x, i) => ({ i, rem: x - Math.floor(x) })).sort((a, b) => b.rem - a.rem || a.i - b.i);
  for (const { i } of order) {
    if (left-- <= 0) break;
    counts[i] = (counts[i] ?? 0) + 1;
  }
  const groups = spec.groups.flatMap((g, i) => ((counts[i] ?? 0) > 0 ? [{ ...g, count: counts[i] as number }] : []));
  return { ...spec, name: `${spec.name.slice(0, 50)}-x${servers}`, groups };
}

/**
 * One ServerSpec per server, in group order. Ids `s0000`… and racks `r000`… are zero-padded to a
 * width that grows with the cluster, so lexical order (etcd key order) equals numeric order.
 * Racks are filled in order, `serversPerRack` at a time.
 */
export function expandCluster(spec: ClusterSpec, platforms: ReadonlyMap<string, Platform>): ServerSpec[] {
  // Specs built in code (simulator sweeps, tests) have not been through the file loader.
  const shape = parseWith(clusterSpecSchema, '', spec);
  const problems = shape.ok ? checkGroupPlatforms(spec, platforms, undefined) : shape.issues.map(({ field, rule }) => ({ field, rule }));
  if (problems.length > 0) throw failure(`cluster spec '${String(spec.name)}'`, problems);
  const total = spec.groups.reduce((n, g) => n + g.count, 0);
  const racks = Math.ceil(total / spec.serversPerRack);
  const idWidth = Math.max(4, String(Math.max(0, total - 1)).length);
  const rackWidth = Math.max(3, String(Math.max(0, racks - 1)).length);
  const out: ServerSpec[] = [];
  for (const g of spec.groups) {
    const p = platforms.get(g.platform);
    if (!p) continue; // unreachable: checked above
    for (let k = 0; k < g.count; k++) {
      const i = out.length;
      out.push({
        id: `s${pad(i, idWidth)}`,
        platform: p.name,
        rack: `r${pad(Math.floor(i / spec.serversPerRack), rackWidth)}`,
        rus: p.cores,
        speed: p.speed,
        attributes: dict(g.attributes),
      });
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Job specs

const schemaCache = new WeakMap<Catalog, ReturnType<typeof makeJobSpecSchema>>();

function catalogNames(catalog: Catalog): CatalogNames {
  return {
    hasPlatform: (n) => catalog.platforms.has(n),
    hasWorkload: (n) => catalog.workloads.has(n),
    platformNames: () => [...catalog.platforms.keys()],
    workloadNames: () => [...catalog.workloads.keys()],
  };
}

/** The job-spec schema that also looks profile and platform names up in the catalog. */
export function jobSchemaFor(catalog: Catalog): ReturnType<typeof makeJobSpecSchema> {
  let s = schemaCache.get(catalog);
  if (!s) {
    s = makeJobSpecSchema(catalogNames(catalog));
    schemaCache.set(catalog, s);
  }
  return s;
}

/**
 * Platforms an inline profile leaves out default to the platform's core speed: the assumption
 * of a compute-bound job, the one a user who gave no numbers is most likely to expect.
 */
function inlineProfile(p: InlineProfileInput, jobName: string, durationMs: number | undefined, catalog: Catalog): WorkloadProfile {
  const platformPerf = dict<number>();
  for (const [name, plat] of catalog.platforms) platformPerf[name] = own(p.platformPerf, name) ?? plat.speed;
  return freezeProfile({
    name: p.name ?? jobName,
    description: p.description ?? `inline profile of job ${jobName}`,
    family: p.family ?? 'inline',
    caused: [...p.caused],
    platformPerf,
    typicalDurationMs: p.typicalDurationMs ?? durationMs ?? 1000,
    latencyCritical: p.latencyCritical ?? false,
  });
}

export interface ParseJobSpecOptions {
  id: string;
  /** Submission time, ms since the epoch (or virtual time in the simulator). */
  now: number;
  /** Where the spec came from (a file name), prefixed to error messages. */
  source?: string;
}

/**
 * Validates a submitted job spec, applies defaults and resolves its profile. A string profile is
 * looked up in the catalog only, never read from disk: specs arrive over the network.
 */
export function parseJobSpec(input: unknown, catalog: Catalog, opts: ParseJobSpecOptions): JobSpec {
  const r = validateJobSpec(input, jobSchemaFor(catalog));
  if (!r.ok)
    throw failure(
      'job spec',
      r.issues.map((i) => (opts.source === undefined ? i : { file: opts.source, ...i })),
    );
  const s = r.value;
  let profile: WorkloadProfile;
  if (typeof s.profile === 'string') {
    const named = catalog.workloads.get(s.profile);
    // Checked by the schema; kept for the type system and against a catalog mutated after caching.
    if (!named) throw failure('job spec', [{ field: 'profile', rule: `unknown workload profile '${s.profile}'` }]);
    profile = named;
  } else {
    profile = inlineProfile(s.profile, s.name, s.durationMs, catalog);
  }
  const constraints: JobSpec['constraints'] = {};
  if (s.constraints.platforms) constraints.platforms = [...s.constraints.platforms];
  if (s.constraints.attributes) constraints.attributes = dict(s.constraints.attributes);
  if (s.constraints.dataServers) constraints.dataServers = [...s.constraints.dataServers];
  const job: JobSpec = {
    id: opts.id,
    name: s.name,
    profile,
    tasks: s.tasks,
    priority: s.priority,
    mode: s.mode,
    locality: { mode: s.locality.mode, scope: s.locality.scope, ...(s.locality.required !== undefined ? { required: s.locality.required } : {}) },
    constraints,
    maxQueueMs: s.maxQueueMs,
    submittedAt: opts.now,
  };
  if (s.durationMs !== undefined) job.durationMs = s.durationMs;
  if (s.command) job.command = s.command.env ? { argv: [...s.command.argv], env: dict(s.command.env) } : { argv: [...s.command.argv] };
  if (s.migratable) job.migratable = true;
  if (s.scaleOut) job.scaleOut = { maxTasks: s.scaleOut.maxTasks };
  if (s.namespace !== undefined && s.namespace !== 'default') job.namespace = s.namespace;
  return job;
}
