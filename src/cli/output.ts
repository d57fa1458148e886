/**
 * The client commands' output formats, as kubectl's `-o`: a table (the default), `wide` (more
 * columns), and the answer itself as `json` or `yaml`. JSON is the proto message in proto3's
 * canonical JSON mapping (lowerCamelCase field names, 64-bit integers as strings, unset message
 * and `optional` fields left out, every other field present with its default), done by protobufjs
 * from the same .proto files the gRPC client loads; YAML is the same object. Under `--watch`, JSON
 * is one document per line per change and YAML one document per change (`---` between them).
 */
import { InvalidArgumentError } from 'commander';

export const OUTPUT_FORMATS = ['json', 'yaml', 'wide'] as const;
export type OutputFormat = 'table' | (typeof OUTPUT_FORMATS)[number];

/** `-o, --output`'s parser: refused with the flag and the formats otherwise. */
export function outputFormat(v: string): OutputFormat {
  if ((OUTPUT_FORMATS as readonly string[]).includes(v)) return v as OutputFormat;
  throw new InvalidArgumentError(`-o/--output must be one of ${OUTPUT_FORMATS.join(', ')} (got '${v}')`);
}

/** The output format of a command's flags: `-o`, or the older `--json`. */
export function formatOf(o: { output?: OutputFormat; json?: boolean }): OutputFormat {
  return o.output ?? (o.json ? 'json' : 'table');
}

/** A message of the Scheduler API, by its name in package tarcil.v1. */
export type MessageName =
  'Job' | 'JobEvent' | 'ListJobsResponse' | 'Cluster' | 'Explanation' | 'Server' | 'ProfileEstimate' | 'ListNamespacesResponse' | 'Namespace';

interface PbType {
  fromObject(o: Record<string, unknown>): unknown;
  toObject(m: unknown, opts: Record<string, unknown>): Record<string, unknown>;
  fieldsArray: PbField[];
}
interface PbField {
  name: string;
  id: number;
  map: boolean;
  repeated: boolean;
  resolvedType: unknown;
}

let root: { lookupType(name: string): PbType } | undefined;

async function messageType(name: MessageName): Promise<PbType> {
  if (!root) {
    const { protoRoot } = await import('../rpc/proto-root.ts');
    // Resolved as a whole: ordered() walks every field's type.
    const r = protoRoot().resolveAll();
    root = { lookupType: (n: string) => r.lookupType(n) };
  }
  return root.lookupType(`tarcil.v1.${name}`);
}

const isType = (t: unknown): t is PbType => typeof t === 'object' && t !== null && 'fieldsArray' in t;

/** The keys of a converted message in field-number order, unset messages (null) left out, at every depth. */
function ordered(t: PbType, o: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const f of [...t.fieldsArray].sort((a, b) => a.id - b.id)) {
    const v = o[f.name];
    if (v === undefined || v === null) continue;
    const sub = f.resolvedType;
    if (!isType(sub)) out[f.name] = v;
    else if (f.map) out[f.name] = Object.fromEntries(Object.entries(v as Record<string, Record<string, unknown>>).map(([k, x]) => [k, ordered(sub, x)]));
    else if (f.repeated) out[f.name] = (v as Record<string, unknown>[]).map((x) => ordered(sub, x));
    else out[f.name] = ordered(sub, v as Record<string, unknown>);
  }
  return out;
}

/** A message as the gRPC client decoded it, in proto3's canonical JSON mapping (see the top). */
export async function canonical(name: MessageName, message: object): Promise<Record<string, unknown>> {
  const t = await messageType(name);
  const obj = t.toObject(t.fromObject(message as Record<string, unknown>), {
    json: true,
    longs: String,
    enums: String,
    defaults: true,
    arrays: true,
    objects: true,
  });
  return ordered(t, obj);
}

/** A message as a JSON or YAML document; `line`: JSON on one line (one per change under --watch). */
export async function renderMessage(format: 'json' | 'yaml', name: MessageName, message: object, opts: { line?: boolean } = {}): Promise<string> {
  const obj = await canonical(name, message);
  if (format === 'json') return opts.line ? JSON.stringify(obj) : JSON.stringify(obj, null, 2);
  const { stringify } = await import('yaml');
  return stringify(obj, { lineWidth: 0 }).replace(/\n$/, '');
}

/** True for a machine-readable format. */
export const isDocument = (f: OutputFormat): f is 'json' | 'yaml' => f === 'json' || f === 'yaml';
