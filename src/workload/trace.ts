/**
 * Production traces as tarcil workloads: the Alibaba GPU cluster trace's CSV format (v2023: a node
 * list and a pod list) and a small generic format a user can convert any trace to, both read into
 * one `Trace`: servers, jobs, and the rows that could not become jobs with the reason.
 *
 * The mapping (docs/traces.md says the same):
 * - a node becomes a server of floor(cpu_milli / 1000) RUs on the platform named by its GPU model,
 *   or `cpu` for a node without GPUs;
 * - a pod of c = ceil(cpu_milli / 1000) cores becomes a job of c tasks committed together
 *   (mode `gang`) and packed by server (locality `pack`, scope `server`);
 * - its platforms: those its `gpu_spec` names; else, if it asks for GPUs, every GPU platform;
 *   else any platform;
 * - its priority from its QoS class: LS and Guaranteed 120, Burstable 100 (the default), BE 80;
 * - arrival = creation_time; duration = deletion_time − scheduled_time, or deletion_time −
 *   creation_time for a pod never scheduled (kept, and flagged `neverScheduled`); both divided by
 *   the compression factor; a duration under 1 ms becomes 1 ms;
 * - its interference profile: the catalog's profiles sorted by name, the one at index
 *   FNV-1a(`<seed>/<job id>`) mod their count (seeded, independent of the rows' order).
 * A pod is unmappable when no server of its platforms has c RUs (and, if it asks for GPUs, that
 * many GPUs), or when its `gpu_spec` names no platform of the node list.
 *
 * Loading is all-or-nothing: every invalid row is reported (file, line, column, rule), up to
 * MAX_PROBLEMS, in one INVALID_ARGUMENT error, and nothing is returned.
 */
import { readFileSync } from 'node:fs';
import { basename } from 'node:path';
import { DEFAULT_PRIORITY } from '../model/types.ts';
import { TarcilError } from '../util/errors.ts';
import { readCsv, type CsvRow, type RowProblem } from './csv.ts';

export type TraceFormat = 'alibaba' | 'generic';

/** Most problems one error lists (the count of the rest is given). */
export const MAX_PROBLEMS = 50;

/** Priority by QoS class: LS and Guaranteed above Burstable above BE. */
export const QOS_PRIORITY: Readonly<Record<string, number>> = {
  LS: DEFAULT_PRIORITY + 20,
  Guaranteed: DEFAULT_PRIORITY + 20,
  Burstable: DEFAULT_PRIORITY,
  BE: DEFAULT_PRIORITY - 20,
};
/** The platform of a node without GPUs. */
export const CPU_PLATFORM = 'cpu';

export interface TraceServer {
  id: string;
  platform: string;
  rus: number;
  gpus: number;
}

export interface TraceJob {
  id: string;
  /** The row it came from (1 = the header). */
  line: number;
  tasks: number;
  mode: 'gang' | 'incremental';
  locality: { mode: 'any' | 'pack'; scope: 'server' };
  /** Absent: any platform. */
  platforms?: string[];
  priority: number;
  /** The QoS class (Alibaba) or `generic`. */
  qos: string;
  /** GPUs the pod asks for (0 for the generic format). */
  gpus: number;
  arrivalMs: number;
  durationMs?: number;
  command?: { argv: string[] };
  profile: string;
  neverScheduled: boolean;
  /** The production scheduler's own wait (scheduled − creation), compressed alike. */
  productionWaitMs?: number;
}

export interface UnmappableRow {
  id: string;
  line: number;
  reason: string;
}

export interface Trace {
  format: TraceFormat;
  compress: number;
  servers: TraceServer[];
  jobs: TraceJob[];
  unmappable: UnmappableRow[];
}

export interface TraceOptions {
  format: TraceFormat;
  /** Divides times and durations (≥ 1). */
  compress: number;
  /** The catalog's profile names to assign from (at least one). */
  profiles: readonly string[];
  seed: number;
}

const NAME_RE = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;
const INT_RE = /^\d+$/;
const NUM_RE = /^\d+(\.\d+)?$/;

/** FNV-1a, 32 bits: the profile rule's hash. */
export function fnv1a(s: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h >>> 0;
}

/** The profile a job is given: the sorted names' entry at FNV-1a(`<seed>/<id>`) mod their count. */
export function profileFor(id: string, seed: number, sortedProfiles: readonly string[]): string {
  return sortedProfiles[fnv1a(`${seed}/${id}`) % sortedProfiles.length] ?? '';
}

/** Cell readers that record a problem and return undefined on a bad value. */
class Cells {
  constructor(
    private readonly file: string,
    private readonly problems: RowProblem[],
  ) {}
  fail(row: CsvRow, column: string, rule: string): undefined {
    this.problems.push({ file: this.file, line: row.line, column, rule });
    return undefined;
  }
  int(row: CsvRow, col: string, min: number, max: number = Number.MAX_SAFE_INTEGER): number | undefined {
    const v = row.cells[col] ?? '';
    if (!INT_RE.test(v) || Number(v) < min || Number(v) > max) return this.fail(row, col, `must be a whole number in [${min}, ${max}], is "${v.slice(0, 40)}"`);
    return Number(v);
  }
  num(row: CsvRow, col: string, positive: boolean): number | undefined {
    const v = row.cells[col] ?? '';
    if (!NUM_RE.test(v) || (positive && Number(v) <= 0) || !Number.isFinite(Number(v)))
      return this.fail(row, col, `must be a ${positive ? 'positive' : 'non-negative'} number of seconds, is "${v.slice(0, 40)}"`);
    return Number(v);
  }
  name(row: CsvRow, col: string): string | undefined {
    const v = row.cells[col] ?? '';
    if (!NAME_RE.test(v)) return this.fail(row, col, `must be 1–64 letters, digits, '.', '_' or '-' starting with a letter or digit, is "${v.slice(0, 40)}"`);
    return v;
  }
  names(row: CsvRow, col: string): string[] | undefined {
    const v = row.cells[col] ?? '';
    if (v === '') return [];
    const parts = v.split('|');
    if (parts.some((p) => !NAME_RE.test(p))) return this.fail(row, col, `must be platform names separated by '|', is "${v.slice(0, 40)}"`);
    return [...new Set(parts)];
  }
  oneOf(row: CsvRow, col: string, allowed: readonly string[]): string | undefined {
    const v = row.cells[col] ?? '';
    if (!allowed.includes(v)) return this.fail(row, col, `must be one of ${allowed.join(', ')}, is "${v.slice(0, 40)}"`);
    return v;
  }
  unique(row: CsvRow, col: string, value: string, seen: Map<string, number>): void {
    const first = seen.get(value);
    if (first !== undefined) this.fail(row, col, `must be unique: "${value}" is on line ${first} too`);
    else seen.set(value, row.line);
  }
}

function throwIfProblems(problems: RowProblem[]): void {
  if (problems.length === 0) return;
  const shown = problems.slice(0, MAX_PROBLEMS).map((p) => `${p.file}:${p.line}: column ${p.column}: ${p.rule}`);
  const more = problems.length > MAX_PROBLEMS ? `\n… and ${problems.length - MAX_PROBLEMS} more problems` : '';
  const first = problems[0]!;
  throw new TarcilError(
    'INVALID_ARGUMENT',
    `the trace has ${problems.length} invalid ${problems.length === 1 ? 'entry' : 'entries'}; nothing was loaded:\n${shown.join('\n')}${more}`,
    {
      field: `${first.file}:${first.line}:${first.column}`,
      details: { problems: problems.slice(0, MAX_PROBLEMS) },
    },
  );
}

const ALIBABA_NODE_COLUMNS = ['sn', 'cpu_milli', 'memory_mib', 'gpu', 'model'] as const;
const ALIBABA_POD_COLUMNS = [
  'name',
  'cpu_milli',
  'memory_mib',
  'num_gpu',
  'gpu_milli',
  'gpu_spec',
  'qos',
  'pod_phase',
  'creation_time',
  'deletion_time',
  'scheduled_time',
] as const;
const QOS_CLASSES = ['LS', 'Guaranteed', 'Burstable', 'BE'] as const;
const POD_PHASES = ['Running', 'Failed', 'Pending', 'Succeeded'] as const;
const GENERIC_NODE_COLUMNS = ['server', 'cores', 'platform'] as const;
const GENERIC_JOB_REQUIRED = ['arrival_s', 'tasks'] as const;
const GENERIC_JOB_OPTIONAL = ['name', 'cores', 'duration_s', 'command', 'platforms', 'priority'] as const;
/** Largest server and job the formats accept (RUs, tasks). */
const MAX_CORES = 100_000;

function alibabaServers(rows: CsvRow[], c: Cells): TraceServer[] {
  const seen = new Map<string, number>();
  const out: TraceServer[] = [];
  for (const row of rows) {
    const id = c.name(row, 'sn');
    if (id !== undefined) c.unique(row, 'sn', id, seen);
    const milli = c.int(row, 'cpu_milli', 1000, MAX_CORES * 1000);
    c.int(row, 'memory_mib', 0);
    const gpus = c.int(row, 'gpu', 0, 1024);
    const model = row.cells.model ?? '';
    let platform: string | undefined = CPU_PLATFORM;
    if (gpus !== undefined && gpus > 0) platform = model === '' ? c.fail(row, 'model', 'must name the GPU model of a node with GPUs') : c.name(row, 'model');
    else if (gpus === 0 && model !== '') platform = c.fail(row, 'model', 'must be empty for a node without GPUs (gpu = 0)');
    if (platform === CPU_PLATFORM && model === CPU_PLATFORM)
      platform = c.fail(row, 'model', `must not be "${CPU_PLATFORM}", the platform of nodes without GPUs`);
    if (id !== undefined && milli !== undefined && gpus !== undefined && platform !== undefined)
      out.push({ id, platform, rus: Math.floor(milli / 1000), gpus });
  }
  return out;
}

function genericServers(rows: CsvRow[], c: Cells): TraceServer[] {
  const seen = new Map<string, number>();
  const out: TraceServer[] = [];
  for (const row of rows) {
    const id = c.name(row, 'server');
    if (id !== undefined) c.unique(row, 'server', id, seen);
    const rus = c.int(row, 'cores', 1, MAX_CORES);
    const platform = c.name(row, 'platform');
    if (id !== undefined && rus !== undefined && platform !== undefined) out.push({ id, platform, rus, gpus: 0 });
  }
  return out;
}

/** Times of one pod in seconds, checked against each other. */
function podTimes(row: CsvRow, c: Cells): { creation: number; run: number; wait?: number } | undefined {
  const creation = c.int(row, 'creation_time', 0);
  const deletion = c.int(row, 'deletion_time', 0);
  const sched = (row.cells.scheduled_time ?? '') === '' ? null : c.int(row, 'scheduled_time', 0);
  if (creation === undefined || deletion === undefined || sched === undefined) return undefined;
  if (sched !== null && sched < creation) return c.fail(row, 'scheduled_time', `must not be before creation_time (${creation})`);
  const from = sched ?? creation;
  if (deletion < from) return c.fail(row, 'deletion_time', `must not be before ${sched === null ? 'creation_time' : 'scheduled_time'} (${from})`);
  return sched === null ? { creation, run: deletion - creation } : { creation, run: deletion - sched, wait: sched - creation };
}

interface Demand {
  id: string;
  line: number;
  tasks: number;
  gpus: number;
  platforms?: string[];
}

/** Why no server can hold the job, or undefined if one can. */
function unmappableReason(d: Demand, servers: TraceServer[], known: Set<string>): string | undefined {
  if (d.platforms && d.platforms.every((p) => !known.has(p))) return `no node is of the platforms it allows (${d.platforms.join(', ')})`;
  const allowed = d.platforms ? new Set(d.platforms) : undefined;
  const fits = servers.some((s) => (!allowed || allowed.has(s.platform)) && s.rus >= d.tasks && s.gpus >= d.gpus);
  if (fits) return undefined;
  const where = allowed ? `of platform ${d.platforms!.join(' or ')}` : '';
  return `no node ${where}${where ? ' ' : ''}has ${d.tasks} cores${d.gpus > 0 ? ` and ${d.gpus} GPUs` : ''}`;
}

const toMs = (s: number, compress: number): number => (s * 1000) / compress;
const durationMs = (s: number, compress: number): number => Math.max(1, Math.round(toMs(s, compress)));

function alibabaJobs(rows: CsvRow[], c: Cells, servers: TraceServer[], o: TraceOptions, unmappable: UnmappableRow[]): TraceJob[] {
  const seen = new Map<string, number>();
  const known = new Set(servers.map((s) => s.platform));
  const gpuPlatforms = [...new Set(servers.filter((s) => s.platform !== CPU_PLATFORM).map((s) => s.platform))].sort();
  const out: TraceJob[] = [];
  for (const row of rows) {
    const id = c.name(row, 'name');
    if (id !== undefined) c.unique(row, 'name', id, seen);
    const milli = c.int(row, 'cpu_milli', 1, MAX_CORES * 1000);
    c.int(row, 'memory_mib', 0);
    const gpus = c.int(row, 'num_gpu', 0, 1024);
    c.int(row, 'gpu_milli', 0, 1000);
    const spec = c.names(row, 'gpu_spec');
    const qos = c.oneOf(row, 'qos', QOS_CLASSES);
    c.oneOf(row, 'pod_phase', POD_PHASES);
    const times = podTimes(row, c);
    if (id === undefined || milli === undefined || gpus === undefined || spec === undefined || qos === undefined || times === undefined) continue;
    const tasks = Math.ceil(milli / 1000);
    const platforms = spec.length > 0 ? spec : gpus > 0 ? gpuPlatforms : undefined;
    const reason = unmappableReason({ id, line: row.line, tasks, gpus, platforms }, servers, known);
    if (reason !== undefined) {
      unmappable.push({ id, line: row.line, reason });
      continue;
    }
    out.push({
      id,
      line: row.line,
      tasks,
      mode: 'gang',
      locality: { mode: 'pack', scope: 'server' },
      ...(platforms ? { platforms } : {}),
      priority: QOS_PRIORITY[qos] ?? DEFAULT_PRIORITY,
      qos,
      gpus,
      arrivalMs: toMs(times.creation, o.compress),
      durationMs: durationMs(times.run, o.compress),
      profile: profileFor(id, o.seed, o.profiles),
      neverScheduled: times.wait === undefined,
      ...(times.wait !== undefined ? { productionWaitMs: toMs(times.wait, o.compress) } : {}),
    });
  }
  return out;
}

function genericJobs(rows: CsvRow[], c: Cells, servers: TraceServer[], o: TraceOptions, unmappable: UnmappableRow[]): TraceJob[] {
  const seen = new Map<string, number>();
  const known = new Set(servers.map((s) => s.platform));
  const out: TraceJob[] = [];
  for (const row of rows) {
    const has = (col: string): boolean => (row.cells[col] ?? '') !== '';
    const id = has('name') ? c.name(row, 'name') : `job-${row.line}`;
    if (id !== undefined) c.unique(row, 'name', id, seen);
    const arrival = c.num(row, 'arrival_s', false);
    const tasks = c.int(row, 'tasks', 1, MAX_CORES);
    const cores = has('cores') ? c.int(row, 'cores', 1, MAX_CORES) : 1;
    const duration = has('duration_s') ? c.num(row, 'duration_s', true) : undefined;
    const argv = has('command') ? (row.cells.command ?? '').split(/\s+/) : undefined;
    if (has('duration_s') === has('command')) c.fail(row, has('command') ? 'command' : 'duration_s', 'exactly one of duration_s and command must be given');
    const spec = c.names(row, 'platforms');
    const priority = has('priority') ? c.int(row, 'priority', 0, 999) : DEFAULT_PRIORITY;
    if (id === undefined || arrival === undefined || tasks === undefined || cores === undefined || spec === undefined || priority === undefined) continue;
    if (has('duration_s') === has('command') || (has('duration_s') && duration === undefined)) continue;
    const total = tasks * cores;
    if (total > MAX_CORES) {
      c.fail(row, 'cores', `tasks × cores must be at most ${MAX_CORES}, is ${total}`);
      continue;
    }
    const platforms = spec.length > 0 ? spec : undefined;
    // Tasks of several cores: each core is a task, and the job's tasks are packed by server.
    const reason =
      cores > 1
        ? unmappableReason({ id, line: row.line, tasks: cores, gpus: 0, platforms }, servers, known)
        : platforms && platforms.every((p) => !known.has(p))
          ? `no node is of the platforms it allows (${platforms.join(', ')})`
          : undefined;
    if (reason !== undefined) {
      unmappable.push({ id, line: row.line, reason });
      continue;
    }
    out.push({
      id,
      line: row.line,
      tasks: total,
      mode: cores > 1 ? 'gang' : 'incremental',
      locality: { mode: cores > 1 ? 'pack' : 'any', scope: 'server' },
      ...(platforms ? { platforms } : {}),
      priority,
      qos: 'generic',
      gpus: 0,
      arrivalMs: toMs(arrival, o.compress),
      ...(duration !== undefined ? { durationMs: durationMs(duration, o.compress) } : {}),
      ...(argv ? { command: { argv } } : {}),
      profile: profileFor(id, o.seed, o.profiles),
      neverScheduled: false,
    });
  }
  return out;
}

/** Reads a trace from the texts of its two files (named for the messages). */
export function parseTrace(nodes: { file: string; text: string }, pods: { file: string; text: string }, o: TraceOptions): Trace {
  if (!(Number.isFinite(o.compress) && o.compress >= 1))
    throw new TarcilError('INVALID_ARGUMENT', `compress: must be a number ≥ 1, is ${o.compress}`, { field: 'compress' });
  if (o.profiles.length === 0) throw new TarcilError('INVALID_ARGUMENT', 'profiles: must name at least one workload profile', { field: 'profiles' });
  const opts = { ...o, profiles: [...o.profiles].sort() };
  const problems: RowProblem[] = [];
  const nodeCols = o.format === 'alibaba' ? ALIBABA_NODE_COLUMNS : GENERIC_NODE_COLUMNS;
  const nodeTable = readCsv(nodes.text, nodes.file, nodeCols, [], problems);
  const jobTable =
    o.format === 'alibaba'
      ? readCsv(pods.text, pods.file, ALIBABA_POD_COLUMNS, [], problems)
      : readCsv(pods.text, pods.file, GENERIC_JOB_REQUIRED, GENERIC_JOB_OPTIONAL, problems);
  throwIfProblems(problems); // a bad header: the rows cannot be read
  const nodeCells = new Cells(nodes.file, problems);
  const servers = o.format === 'alibaba' ? alibabaServers(nodeTable.rows, nodeCells) : genericServers(nodeTable.rows, nodeCells);
  if (nodeTable.rows.length === 0) problems.push({ file: nodes.file, line: 1, column: '(rows)', rule: 'must list at least one node' });
  const unmappable: UnmappableRow[] = [];
  const jobCells = new Cells(pods.file, problems);
  const jobs =
    o.format === 'alibaba' ? alibabaJobs(jobTable.rows, jobCells, servers, opts, unmappable) : genericJobs(jobTable.rows, jobCells, servers, opts, unmappable);
  throwIfProblems(problems);
  return { format: o.format, compress: o.compress, servers, jobs, unmappable };
}

/** Reads a trace from its two files. */
export function loadTrace(nodesPath: string, podsPath: string, o: TraceOptions): Trace {
  const read = (path: string, what: string): { file: string; text: string } => {
    try {
      return { file: basename(path), text: readFileSync(path, 'utf8') };
    } catch (err) {
      throw new TarcilError('INVALID_ARGUMENT', `${what}: cannot read ${path}: ${(err as Error).message}`, { field: what, cause: err });
    }
  };
  return parseTrace(read(nodesPath, '--nodes'), read(podsPath, '--pods'), o);
}
