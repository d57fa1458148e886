/**
 * The request generator of the wire fuzzer (runner and oracle in wire-fuzz-run.ts): every RPC of
 * every service of proto/ and every field of its request, found by walking the protobufjs Root
 * the clients load (src/rpc/proto-root.ts), so a field added to a .proto file is fuzzed
 * without a change here.
 *
 * A field is reached by a path in the proto's own names: `spec.constraints.attributes{key}`,
 * `states[]`, `spec.inline_profile` (the message field itself), `(request)` (the whole request).
 * Each path gets the invalid values of its type (KINDS): for strings empty, wrong case, NUL,
 * control characters, invalid UTF-8, other planes (emoji), huge, `__proto__` / `constructor` /
 * `toString`, unknown words; for numbers negative, NaN, ±Infinity, 2^53, overflow; for every field a wrong wire type;
 * for messages unknown fields, invalid wire types, lengths past the end.
 *
 * Requests are encoded here with protobufjs's Writer from the fields' numbers and types, not with
 * the message classes: a class would refuse or normalise what a hostile client sends as it is
 * (invalid UTF-8, a map key `__proto__`, a varint where a double belongs).
 */
import protobuf from 'protobufjs';
import { SeededRng, type Rng } from '../../src/util/rng.ts';

/** One RPC: `Scheduler/SubmitJob`, with its request and response types. */
export interface Rpc {
  /** `Scheduler/SubmitJob` (the service's short name and the method). */
  name: string;
  /** The fully qualified service, `tarcil.v1.Scheduler`. */
  service: string;
  method: string;
  /** The HTTP/2 path, `/tarcil.v1.Scheduler/SubmitJob`. */
  path: string;
  req: protobuf.Type;
  res: protobuf.Type;
  responseStream: boolean;
}

/** How a path's value is reached from its message: the field itself, an element, a map key or value. */
type Part = 'self' | 'elem' | 'key' | 'value';
interface Step {
  field: protobuf.Field;
  part: Part;
}

/** What sits at the end of a path. */
export type Leaf = { kind: 'root' } | { kind: 'message'; type: protobuf.Type } | { kind: 'scalar'; type: string } | { kind: 'enum'; en: protobuf.Enum };

/** One field of one RPC's request, with the mutations its type gets. */
export interface Site {
  rpc: Rpc;
  /** `spec.constraints.attributes{key}`; `(request)` for the request as a whole. */
  path: string;
  steps: Step[];
  leaf: Leaf;
  kinds: readonly Kind[];
}

export const ROOT_PATH = '(request)';

const STRING_KINDS = [
  'empty',
  'wrong-case',
  'padded',
  'nul',
  'control',
  'invalid-utf8',
  'unicode',
  'emoji-odd',
  'emoji-even',
  'huge',
  'oversize',
  'key-proto',
  'key-constructor',
  'key-tostring',
  'unknown',
  'wrong-wire',
] as const;
const FLOAT_KINDS = ['negative', 'nan', 'inf', 'neg-inf', 'two53', 'huge-number', 'fraction', 'neg-zero', 'wrong-wire'] as const;
const VARINT_KINDS = ['negative', 'max', 'two53', 'overflow', 'overlong-varint', 'wrong-wire'] as const;
const FIXED_KINDS = ['negative', 'max', 'wrong-wire'] as const;
const BOOL_KINDS = ['non-canonical', 'overlong-varint', 'wrong-wire'] as const;
const BYTES_KINDS = ['empty', 'huge', 'oversize', 'wrong-wire'] as const;
const ENUM_KINDS = ['unknown-enum', 'negative', 'overlong-varint', 'wrong-wire'] as const;
const MESSAGE_KINDS = ['empty-message', 'unknown-field', 'invalid-wire-type', 'open-group', 'truncated', 'wrong-wire'] as const;
const ROOT_KINDS = ['empty-request', 'unknown-field', 'invalid-wire-type', 'open-group', 'truncated', 'garbage'] as const;

/**
 * The mutation kinds. `many` (repeated fields and map keys: 20,000 of them) is added to the kinds
 * of an element or key; `random` (a random value of the type) is drawn by the random phase only.
 */
export type Kind =
  | (typeof STRING_KINDS)[number]
  | (typeof FLOAT_KINDS)[number]
  | (typeof VARINT_KINDS)[number]
  | (typeof FIXED_KINDS)[number]
  | (typeof BOOL_KINDS)[number]
  | (typeof BYTES_KINDS)[number]
  | (typeof ENUM_KINDS)[number]
  | (typeof MESSAGE_KINDS)[number]
  | (typeof ROOT_KINDS)[number]
  | 'many'
  | 'random';

/** Wire type of each scalar type (protobuf encoding): 0 varint, 1 64-bit, 2 length-delimited, 5 32-bit. */
const WIRE: Record<string, number> = {
  double: 1,
  float: 5,
  int32: 0,
  uint32: 0,
  sint32: 0,
  int64: 0,
  uint64: 0,
  sint64: 0,
  fixed32: 5,
  fixed64: 1,
  sfixed32: 5,
  sfixed64: 1,
  bool: 0,
  string: 2,
  bytes: 2,
};
const WIDE = new Set(['int64', 'uint64', 'sint64', 'fixed64', 'sfixed64']);

/** The mutation kinds of a leaf (without `many` and `random`). */
export function kindsOf(leaf: Leaf): readonly Kind[] {
  switch (leaf.kind) {
    case 'root':
      return ROOT_KINDS;
    case 'message':
      return MESSAGE_KINDS;
    case 'enum':
      return ENUM_KINDS;
    case 'scalar':
      switch (leaf.type) {
        case 'string':
          return STRING_KINDS;
        case 'bytes':
          return BYTES_KINDS;
        case 'bool':
          return BOOL_KINDS;
        case 'double':
        case 'float':
          return FLOAT_KINDS;
        default:
          return WIRE[leaf.type] === 0 ? VARINT_KINDS : FIXED_KINDS;
      }
  }
}

/** A proto field's name as written in the .proto file (protobufjs turns `max_rus` into `maxRus`). */
export function protoName(f: protobuf.Field): string {
  return f.name.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);
}

/** Every service of the Root, in declaration order. */
function servicesOf(ns: protobuf.NamespaceBase): protobuf.Service[] {
  const out: protobuf.Service[] = [];
  for (const n of ns.nestedArray) {
    if (n instanceof protobuf.Service) out.push(n);
    else if (n instanceof protobuf.Namespace || n instanceof protobuf.Type) out.push(...servicesOf(n));
  }
  return out;
}

/** Every RPC of every service of the Root. */
export function rpcsOf(root: protobuf.Root): Rpc[] {
  root.resolveAll();
  return servicesOf(root).flatMap((svc) => {
    const service = svc.fullName.replace(/^\./, '');
    return svc.methodsArray.map((m) => ({
      name: `${svc.name}/${m.name}`,
      service,
      method: m.name,
      path: `/${service}/${m.name}`,
      req: m.resolvedRequestType as protobuf.Type,
      res: m.resolvedResponseType as protobuf.Type,
      responseStream: m.responseStream === true,
    }));
  });
}

function leafOf(f: protobuf.Field, type: string, resolved: protobuf.ReflectionObject | null): Leaf {
  if (resolved instanceof protobuf.Type) return { kind: 'message', type: resolved };
  if (resolved instanceof protobuf.Enum) return { kind: 'enum', en: resolved };
  if (WIRE[type] === undefined) throw new Error(`field ${f.fullName}: unknown type ${type}`);
  return { kind: 'scalar', type };
}

/**
 * Every field path of one RPC's request, recursively (nested messages, oneof members, repeated
 * fields, map keys and values), each with its mutation kinds; the request itself first.
 */
export function sitesOf(rpc: Rpc): Site[] {
  const out: Site[] = [{ rpc, path: ROOT_PATH, steps: [], leaf: { kind: 'root' }, kinds: ROOT_KINDS }];
  const walk = (type: protobuf.Type, prefix: string, steps: Step[], stack: protobuf.Type[]): void => {
    for (const f of type.fieldsArray) {
      f.resolve();
      const base = prefix === '' ? protoName(f) : `${prefix}.${protoName(f)}`;
      const add = (path: string, part: Part, leaf: Leaf, extra: Kind[] = []): void => {
        const s: Site = { rpc, path, steps: [...steps, { field: f, part }], leaf, kinds: [...kindsOf(leaf), ...extra] };
        out.push(s);
        // A message inside: its own fields, unless the walk is already inside it (a recursive message).
        if (leaf.kind === 'message' && !stack.includes(leaf.type)) walk(leaf.type, path, s.steps, [...stack, leaf.type]);
      };
      if (f instanceof protobuf.MapField) {
        add(`${base}{key}`, 'key', { kind: 'scalar', type: f.keyType }, ['many']);
        add(`${base}{value}`, 'value', leafOf(f, f.type, f.resolvedType));
      } else if (f.repeated) {
        add(`${base}[]`, 'elem', leafOf(f, f.type, f.resolvedType), ['many']);
      } else {
        add(base, 'self', leafOf(f, f.type, f.resolvedType));
      }
    }
  };
  walk(rpc.req, '', [], [rpc.req]);
  return out;
}

// ---------------------------------------------------------------------------------------------
// Requests as trees, and their encoding.

/**
 * A value written as raw bytes (a tag and a payload chosen by the mutation), in place of a
 * field's value: `write(w, id)` gets the field number it stands for (0 for extra fields).
 */
export class Raw {
  constructor(
    readonly note: string,
    readonly write: (w: protobuf.Writer, id: number) => void,
  ) {}
}

/** Extra raw fields written at the end of a message (unknown fields, invalid wire types). */
export const EXTRA = Symbol('extra fields');

/**
 * A request as the fuzzer builds it: message fields by their protobufjs names; repeated fields as
 * arrays; maps as arrays of [key, value] pairs (so `__proto__` is a key like any other); a Raw
 * anywhere a value goes.
 */
export type Msg = { [field: string]: unknown; [EXTRA]?: Raw[] };

const tag = (id: number, wire: number): number => ((id << 3) | wire) >>> 0;

function writeBare(w: protobuf.Writer, type: string, v: unknown): void {
  switch (type) {
    case 'double':
      w.double(v as number);
      return;
    case 'float':
      w.float(v as number);
      return;
    case 'int32':
      w.int32(v as number);
      return;
    case 'uint32':
      w.uint32(v as number);
      return;
    case 'sint32':
      w.sint32(v as number);
      return;
    case 'int64':
      w.int64(v as number);
      return;
    case 'uint64':
      w.uint64(v as number);
      return;
    case 'sint64':
      w.sint64(v as number);
      return;
    case 'fixed32':
      w.fixed32(v as number);
      return;
    case 'sfixed32':
      w.sfixed32(v as number);
      return;
    case 'fixed64':
      w.fixed64(v as number);
      return;
    case 'sfixed64':
      w.sfixed64(v as number);
      return;
    case 'bool':
      w.bool(v as boolean);
      return;
    case 'string':
      w.string(v as string);
      return;
    case 'bytes':
      w.bytes(v as Uint8Array);
      return;
    default:
      throw new Error(`cannot write a ${type}`);
  }
}

function writeField(w: protobuf.Writer, id: number, type: string, resolved: protobuf.ReflectionObject | null, v: unknown): void {
  if (v instanceof Raw) {
    v.write(w, id);
    return;
  }
  if (resolved instanceof protobuf.Type) {
    w.uint32(tag(id, 2)).fork();
    encodeInto(resolved, v as Msg, w);
    w.ldelim();
    return;
  }
  if (resolved instanceof protobuf.Enum) {
    w.uint32(tag(id, 0)).int32(v as number);
    return;
  }
  w.uint32(tag(id, WIRE[type] as number));
  writeBare(w, type, v);
}

function encodeInto(type: protobuf.Type, m: Msg, w: protobuf.Writer): void {
  for (const f of type.fieldsArray) {
    const v = m[f.name];
    if (v === undefined) continue;
    if (v instanceof Raw) {
      v.write(w, f.id);
      continue;
    }
    if (f instanceof protobuf.MapField) {
      for (const [k, val] of v as Array<[unknown, unknown]>) {
        w.uint32(tag(f.id, 2)).fork();
        writeField(w, 1, f.keyType, null, k);
        writeField(w, 2, f.type, f.resolvedType, val);
        w.ldelim();
      }
      continue;
    }
    if (f.repeated) {
      const arr = v as unknown[];
      const packable = f.resolvedType instanceof protobuf.Enum || (!(f.resolvedType instanceof protobuf.Type) && WIRE[f.type] !== 2);
      if (packable && arr.length > 0 && !arr.some((x) => x instanceof Raw)) {
        // proto3 packs repeated numbers: one length-delimited field with the values one after another.
        w.uint32(tag(f.id, 2)).fork();
        for (const x of arr) writeBare(w, f.resolvedType instanceof protobuf.Enum ? 'int32' : f.type, x);
        w.ldelim();
      } else {
        for (const x of arr) writeField(w, f.id, f.type, f.resolvedType, x);
      }
      continue;
    }
    writeField(w, f.id, f.type, f.resolvedType, v);
  }
  for (const r of m[EXTRA] ?? []) r.write(w, 0);
}

/** The bytes of a request tree of `type`. */
export function encode(type: protobuf.Type, m: Msg): Buffer {
  const w = protobuf.Writer.create();
  encodeInto(type, m, w);
  const b = w.finish();
  return Buffer.from(b.buffer, b.byteOffset, b.byteLength);
}

// ---------------------------------------------------------------------------------------------
// Mutations.

/** The largest request a tarcil server takes (src/rpc/grpc.ts MAX_REQUEST_BYTES). */
export const MAX_REQUEST_BYTES = 1 << 20;
/** How many elements or map entries `many` sends. */
export const MANY = 20_000;
const HUGE_CHARS = 200_000;
const UNKNOWN_FIELD = 1000;

/**
 * Appends bytes as they are (a varint of 11 bytes, a tag with wire type 7): the Writer has no
 * method for that, so this queues them through the operation list every method of it uses.
 */
function pushRaw(w: protobuf.Writer, bytes: number[] | Uint8Array): void {
  const b = Uint8Array.from(bytes);
  (w as unknown as { _push(fn: (val: Uint8Array, buf: Uint8Array, pos: number) => void, len: number, val: Uint8Array): protobuf.Writer })._push(
    (val, buf, pos) => buf.set(val, pos),
    b.length,
    b,
  );
}
const bytesRaw = (note: string, bytes: number[] | Uint8Array): Raw => new Raw(note, (w) => pushRaw(w, bytes));
function varintBytes(n: bigint): number[] {
  const out: number[] = [];
  let x = n;
  do {
    let b = Number(x & 0x7fn);
    x >>= 7n;
    if (x > 0n) b |= 0x80;
    out.push(b);
  } while (x > 0n);
  return out;
}
/** A field with wire type `wire` and a payload of raw bytes (already encoded). */
const rawField = (note: string, wire: number, payload: number[] | Uint8Array): Raw =>
  new Raw(note, (w, id) => {
    w.uint32(tag(id || UNKNOWN_FIELD, wire));
    pushRaw(w, payload);
  });
const varintField = (note: string, n: bigint): Raw => rawField(note, 0, varintBytes(n));

/** The value that is not of the field's wire type: a varint for a length-delimited or 64-bit field, 3 bytes for a varint. */
function wrongWire(leaf: Leaf): Raw {
  const wire = leaf.kind === 'scalar' ? (WIRE[leaf.type] as number) : leaf.kind === 'enum' ? 0 : 2;
  if (wire === 0) return rawField('length-delimited where a varint belongs', 2, [3, 0x61, 0x62, 0x63]);
  if (wire === 2) return varintField('varint where a length-delimited value belongs', 7n);
  return varintField(`varint where a ${wire === 1 ? '64' : '32'}-bit value belongs`, 1n);
}

const OVERLONG = [0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00];

function wrongCase(s: string): string {
  if (!/[a-zA-Z]/.test(s)) return 'Default';
  const i = s.search(/[a-zA-Z]/);
  const c = s.charAt(i);
  const swapped = c === c.toLowerCase() ? c.toUpperCase() : c.toLowerCase();
  return s.slice(0, i) + swapped + s.slice(i + 1);
}

function randomString(rng: Rng): string {
  const len = rng.next() < 0.1 ? 1000 + rng.int(5000) : rng.int(40);
  let s = '';
  for (let i = 0; i < len; i++) {
    const r = rng.next();
    // Mostly ASCII (printable and control), some Latin-1, BMP (lone surrogates included) and astral.
    const cp = r < 0.6 ? rng.int(0x80) : r < 0.8 ? 0x80 + rng.int(0x780) : r < 0.95 ? rng.int(0x10000) : 0x10000 + rng.int(0x100000);
    s += String.fromCodePoint(cp);
  }
  return s;
}

function randomBytes(rng: Rng, n: number): Uint8Array {
  const b = new Uint8Array(n);
  for (let i = 0; i < n; i++) b[i] = rng.int(256);
  return b;
}

function randomDouble(rng: Rng): number {
  const pool = [0, -0, 1, -1, 0.5, 1e-320, Number.EPSILON, 2 ** 31, 2 ** 32, 2 ** 53 + 2, -(2 ** 63), 1e21, Number.MAX_SAFE_INTEGER, Number.MIN_VALUE];
  if (rng.next() < 0.5) return pool[rng.int(pool.length)] as number;
  // Any 64 bits: NaNs with payloads, subnormals, huge exponents.
  return new Float64Array(randomBytes(rng, 8).buffer)[0] as number;
}

/**
 * The value of mutation `kind` for a leaf whose valid value is `current` (a value, or a Raw to
 * write in its place).
 */
export function mutateValue(kind: Kind, leaf: Leaf, current: unknown, rng: Rng): unknown {
  const type = leaf.kind === 'scalar' ? leaf.type : leaf.kind;
  const cur = typeof current === 'string' ? current : '';
  if (kind === 'wrong-wire') return wrongWire(leaf);
  switch (kind) {
    case 'empty':
      return type === 'bytes' ? new Uint8Array(0) : '';
    case 'wrong-case':
      return wrongCase(cur);
    case 'padded':
      return ` ${cur || 'x'} `;
    case 'nul':
      return cur === '' ? '\u0000' : `${cur}\u0000`;
    case 'control':
      return `${cur}\u0001\u001b[2J\r\n\t\u007f\u0085`;
    case 'invalid-utf8':
      // A byte that never starts a character, an overlong '/', a lone surrogate, a cut sequence.
      return new Raw(
        'invalid UTF-8',
        (w, id) => void w.uint32(tag(id, 2)).bytes(Buffer.concat([Buffer.from(cur), Buffer.from([0xff, 0xfe, 0xc0, 0xaf, 0xed, 0xa0, 0x80, 0xe2, 0x82])])),
      );
    case 'unicode':
      return `${cur}\u202e\ufeffé名🙂\u{10ffff}`;
    case 'emoji-odd':
    case 'emoji-even':
      // 600 characters outside the BMP (two code units each) after one or two ASCII ones: a message
      // that cuts the value at a fixed number of code units cuts one of them in half.
      return `${cur}${kind === 'emoji-odd' ? 'x' : 'xx'}${'🙂'.repeat(600)}`;
    case 'huge':
      return type === 'bytes' ? new Uint8Array(HUGE_CHARS) : `${cur}${'x'.repeat(HUGE_CHARS)}`;
    case 'oversize':
      return type === 'bytes' ? new Uint8Array(MAX_REQUEST_BYTES + 1024) : 'x'.repeat(MAX_REQUEST_BYTES + 1024);
    case 'key-proto':
      return '__proto__';
    case 'key-constructor':
      return 'constructor';
    case 'key-tostring':
      return 'toString';
    case 'unknown':
      return 'fuzz-nosuch';
    case 'nan':
      return NaN;
    case 'inf':
      return Infinity;
    case 'neg-inf':
      return -Infinity;
    case 'huge-number':
      return Number.MAX_VALUE;
    case 'fraction':
      return 0.5;
    case 'neg-zero':
      return -0;
    case 'negative':
      if (type === 'double' || type === 'float') return -1;
      if (leaf.kind === 'enum' || type.startsWith('s') || type === 'int32' || type === 'int64') return -1;
      // An unsigned field sent the encoding of -1 (ten bytes, as int32 -1 is written).
      return WIRE[type] === 0 ? varintField('-1 as a varint', 2n ** 64n - 1n) : type === 'fixed32' ? 0xffffffff : -1;
    case 'max':
      return WIDE.has(type) ? varintOrFixed(type, 2n ** 64n - 1n) : type.startsWith('s') || type === 'int32' ? 2147483647 : 4294967295;
    case 'two53':
      if (type === 'double' || type === 'float') return 2 ** 53;
      return varintField('2^53 as a varint', 2n ** 53n);
    case 'overflow':
      // One more than the type holds: 2^32 for 32-bit types, 2^64 (a varint of 10 bytes whose last is 2) for 64-bit ones.
      return varintField(WIDE.has(type) ? '2^64 as a varint' : '2^32 as a varint', WIDE.has(type) ? 2n ** 64n : 2n ** 32n);
    case 'overlong-varint':
      return rawField('a varint of 11 bytes', 0, OVERLONG);
    case 'non-canonical':
      return varintField('bool 2', 2n);
    case 'unknown-enum': {
      const ids = new Set(Object.values((leaf as { en: protobuf.Enum }).en.values));
      let v = 99;
      while (ids.has(v)) v++;
      return v;
    }
    case 'random':
      return randomValue(leaf, rng);
    default:
      throw new Error(`kind ${kind} is not a value of a ${type}`);
  }
}

function varintOrFixed(type: string, n: bigint): Raw {
  if (WIRE[type] === 0) return varintField(`${n} as a varint`, n);
  const b = Buffer.alloc(8);
  b.writeBigUInt64LE(n & (2n ** 64n - 1n));
  return rawField(`${n} as 64 bits`, 1, b);
}

/** A message field whose content is random bytes. */
const randomMessage = (rng: Rng): Raw => {
  const content = randomBytes(rng, rng.int(48));
  return new Raw('random bytes', (w, id) => void w.uint32(tag(id, 2)).bytes(content));
};

function randomValue(leaf: Leaf, rng: Rng): unknown {
  if (leaf.kind === 'enum') return rng.int(2000) - 1000;
  if (leaf.kind === 'message' || leaf.kind === 'root') return randomMessage(rng);
  switch (leaf.type) {
    case 'string':
      return randomString(rng);
    case 'bytes':
      return randomBytes(rng, rng.int(64));
    case 'double':
    case 'float':
      return randomDouble(rng);
    case 'bool':
      return varintField('a random varint as a bool', BigInt(rng.int(256)));
    default: {
      if (WIRE[leaf.type] !== 0) return rng.int(2 ** 31);
      // Any varint of up to 64 bits.
      const hi = BigInt(rng.int(2 ** 32));
      const lo = BigInt(rng.int(2 ** 32));
      return varintField('a random varint', rng.next() < 0.5 ? lo : (hi << 32n) | lo);
    }
  }
}

const MALFORMED: ReadonlySet<Kind> = new Set(['wrong-wire', 'overlong-varint', 'invalid-wire-type', 'open-group', 'truncated', 'garbage']);
const VARINT32 = new Set(['int32', 'uint32', 'sint32', 'bool']);

/**
 * Whether mutation `kind` at `site` may make the server read the request as something else than
 * the other mutations say: bytes that do not parse, and varints of 6 to 9 bytes in a 32-bit field
 * (2^53, random ones), which protobufjs reads as if they had 10, taking the next bytes with them.
 */
export function corrupts(site: Site, kind: Kind): boolean {
  if (MALFORMED.has(kind)) return true;
  if (kind === 'random' && (site.leaf.kind === 'message' || site.leaf.kind === 'root')) return true;
  const narrow = site.leaf.kind === 'enum' || (site.leaf.kind === 'scalar' && VARINT32.has(site.leaf.type));
  return narrow && (kind === 'two53' || kind === 'random');
}

/** A valid value of a scalar or enum leaf, for a map entry or a list element the base request lacks. */
function validScalar(leaf: Leaf): unknown {
  if (leaf.kind === 'enum') return Object.values(leaf.en.values)[0] ?? 0;
  if (leaf.kind !== 'scalar') return {};
  if (leaf.type === 'string') return 'x';
  if (leaf.type === 'bytes') return new Uint8Array([1]);
  if (leaf.type === 'bool') return true;
  return 1;
}

// ---------------------------------------------------------------------------------------------
// Cases.

export interface Mutation {
  path: string;
  kind: Kind;
}

/** One request: the RPC, its mutations (one in the exhaustive phase, 1-3 in the random one). */
export interface FuzzCase {
  /** Its number in the run: with the run's seed, enough to build it again. */
  n: number;
  rpc: string;
  mutations: Mutation[];
}

/**
 * What a case is built on: a valid request for each RPC (several variants, the first that sets
 * the mutated field's top-level field is used), and a valid value for a message the base lacks
 * (by message type), so that a mutation is judged on its own value.
 */
export interface Bases {
  request(rpc: string, n: number): Msg[];
  fill(type: protobuf.Type): Msg | undefined;
}

const clone = <T>(v: T): T => {
  if (v instanceof Raw || v instanceof Uint8Array) return v;
  if (Array.isArray(v)) return v.map(clone) as T;
  if (v !== null && typeof v === 'object') {
    const out: Msg = {};
    for (const [k, x] of Object.entries(v)) out[k] = clone(x);
    const extra = (v as Msg)[EXTRA];
    if (extra) out[EXTRA] = [...extra];
    return out as T;
  }
  return v;
};

function pickBase(variants: Msg[], site: Site): Msg {
  const top = site.steps[0]?.field.name;
  const chosen = top === undefined ? variants[0] : (variants.find((v) => v[top] !== undefined && v[top] !== '') ?? variants[0]);
  return clone(chosen ?? {});
}

/** The message at `obj[f]`, made present with the type's valid value (or empty) and its oneof siblings cleared. */
function enter(obj: Msg, f: protobuf.Field, bases: Bases): Msg {
  const type = f.resolvedType as protobuf.Type;
  let m = obj[f.name];
  if (m === undefined || m instanceof Raw) {
    m = clone(bases.fill(type) ?? {});
    obj[f.name] = m;
  }
  if (f.partOf) for (const other of f.partOf.fieldsArray) if (other !== f) delete obj[other.name];
  return m as Msg;
}

/** Applies one mutation to a request tree in place. */
export function applyMutation(req: Msg, site: Site, kind: Kind, bases: Bases, rng: Rng): void {
  if (site.leaf.kind === 'root') {
    applyMessageKind(req, kind, rng);
    return;
  }
  let obj = req;
  site.steps.forEach((step, i) => {
    const last = i === site.steps.length - 1;
    const f = step.field;
    if (!last) {
      // A message on the way: the field itself, an element of a list or the value of a map entry.
      if (step.part === 'self') obj = enter(obj, f, bases);
      else if (step.part === 'elem') {
        const arr = Array.isArray(obj[f.name]) ? (obj[f.name] as unknown[]) : (obj[f.name] = []);
        if (arr.length === 0 || !(arr[0] !== null && typeof arr[0] === 'object' && !(arr[0] instanceof Raw)))
          arr[0] = clone(bases.fill(f.resolvedType as protobuf.Type) ?? {});
        obj = arr[0] as Msg;
      } else {
        const entries = Array.isArray(obj[f.name]) ? (obj[f.name] as Array<[unknown, unknown]>) : (obj[f.name] = []);
        if (entries.length === 0) entries.push(['x', clone(bases.fill(f.resolvedType as protobuf.Type) ?? {})]);
        obj = (entries[0] as [unknown, unknown])[1] as Msg;
      }
      return;
    }
    mutateAt(obj, step, site.leaf, kind, bases, rng);
  });
}

function mutateAt(obj: Msg, step: Step, leaf: Leaf, kind: Kind, bases: Bases, rng: Rng): void {
  const f = step.field;
  if (f.partOf) for (const other of f.partOf.fieldsArray) if (other !== f) delete obj[other.name];
  const valueLeaf: Leaf = step.part === 'key' ? { kind: 'scalar', type: (f as unknown as protobuf.MapField).keyType } : leaf;
  const valid = (): unknown => (leaf.kind === 'message' ? clone(bases.fill(leaf.type) ?? {}) : validScalar(valueLeaf));
  const bad = (current: unknown): unknown => {
    if (leaf.kind === 'message' && step.part !== 'key') {
      const m = current !== undefined && !(current instanceof Raw) ? (clone(current) as Msg) : (valid() as Msg);
      return messageValue(m, kind, rng);
    }
    return mutateValue(kind, valueLeaf, current, rng);
  };
  if (step.part === 'self') {
    obj[f.name] = bad(obj[f.name]);
    return;
  }
  if (step.part === 'elem') {
    const arr = Array.isArray(obj[f.name]) ? [...(obj[f.name] as unknown[])] : [];
    if (kind === 'many') obj[f.name] = Array.from({ length: manyCount(arr[0] ?? valid()) }, () => clone(arr[0] ?? valid()));
    else {
      const i = arr.length === 0 ? 0 : rng.int(arr.length);
      arr[i] = bad(arr[i]);
      obj[f.name] = arr;
    }
    return;
  }
  const entries = Array.isArray(obj[f.name]) ? (obj[f.name] as Array<[unknown, unknown]>).map(([k, v]) => [k, v] as [unknown, unknown]) : [];
  if (entries.length === 0) entries.push([validScalar({ kind: 'scalar', type: (f as unknown as protobuf.MapField).keyType }), valid()]);
  const i = rng.int(entries.length);
  const e = entries[i] as [unknown, unknown];
  if (step.part === 'key') {
    if (kind === 'many') {
      const n = manyCount(e[1]);
      obj[f.name] = Array.from({ length: n }, (_, j) => [(f as unknown as protobuf.MapField).keyType === 'string' ? `k${j}` : j + 1, clone(e[1])]);
      return;
    }
    e[0] = bad(e[0]);
  } else e[1] = bad(e[1]);
  obj[f.name] = entries;
}

/** How many copies of `v` `many` sends: MANY, fewer for a long value (the request stays about 400 KB). */
function manyCount(v: unknown): number {
  const size = typeof v === 'string' ? v.length + 3 : typeof v === 'object' && v !== null ? 64 : 10;
  return Math.max(2, Math.min(MANY, Math.floor(400_000 / size)));
}

function messageValue(m: Msg, kind: Kind, rng: Rng): unknown {
  switch (kind) {
    case 'empty-message':
      return {};
    case 'wrong-wire':
      return varintField('varint where a message belongs', 1n);
    case 'random':
      return randomMessage(rng);
    default:
      applyMessageKind(m, kind, rng);
      return m;
  }
}

/** The mutations of a message as a whole (or of the request): extra fields at its end. */
function applyMessageKind(m: Msg, kind: Kind, rng: Rng): void {
  const extra = (r: Raw): void => {
    m[EXTRA] = [...(m[EXTRA] ?? []), r];
  };
  switch (kind) {
    case 'empty-request':
      for (const k of Object.keys(m)) delete m[k];
      return;
    case 'unknown-field':
      // One unknown field of each wire type: a decoder skips them.
      extra(varintField('unknown varint field', 1n));
      extra(new Raw('unknown 64-bit field', (w) => void w.uint32(tag(UNKNOWN_FIELD + 1, 1)).double(1)));
      extra(new Raw('unknown length-delimited field', (w) => void w.uint32(tag(UNKNOWN_FIELD + 2, 2)).string('x')));
      extra(new Raw('unknown 32-bit field', (w) => void w.uint32(tag(UNKNOWN_FIELD + 3, 5)).float(1)));
      return;
    case 'invalid-wire-type':
      extra(new Raw('wire type 7', (w) => void w.uint32(tag(UNKNOWN_FIELD, 7))));
      return;
    case 'open-group':
      extra(
        new Raw(
          'a group that is never closed',
          (w) =>
            void w
              .uint32(tag(UNKNOWN_FIELD, 3))
              .uint32(tag(UNKNOWN_FIELD + 1, 0))
              .uint32(1),
        ),
      );
      return;
    case 'truncated':
      extra(new Raw('a length past the end', (w) => pushRaw(w.uint32(tag(UNKNOWN_FIELD, 2)).uint32(1_000_000), [0x61, 0x62])));
      return;
    case 'garbage':
    case 'random':
      for (const k of Object.keys(m)) delete m[k];
      extra(bytesRaw('random bytes', randomBytes(rng, 1 + rng.int(200))));
      return;
    default:
      throw new Error(`kind ${kind} is not a mutation of a message`);
  }
}

/** The bytes of a case: its RPC's base request with each mutation applied. */
export function buildCase(c: FuzzCase, sites: ReadonlyMap<string, Site>, bases: Bases, seed: number): { site: Site; bytes: Buffer } {
  const rng = caseRng(seed, c.n);
  const first = sites.get(`${c.rpc} ${c.mutations[0]?.path ?? ROOT_PATH}`);
  if (!first) throw new Error(`no site ${c.rpc} ${c.mutations[0]?.path}`);
  const req = pickBase(bases.request(c.rpc, c.n), first);
  for (const m of c.mutations) {
    const site = sites.get(`${c.rpc} ${m.path}`);
    if (!site) throw new Error(`no site ${c.rpc} ${m.path}`);
    applyMutation(req, site, m.kind, bases, rng);
  }
  return { site: first, bytes: encode(first.rpc.req, req) };
}

/** The random numbers of case n of a run: its own stream, so one case can be built again alone. */
export function caseRng(seed: number, n: number): Rng {
  return new SeededRng((Math.imul(seed | 0, 0x9e3779b1) ^ Math.imul(n + 1, 0x85ebca6b)) | 0);
}

export interface Plan {
  rpcs: Rpc[];
  sites: Site[];
  /** Sites by `<rpc> <path>`. */
  byKey: Map<string, Site>;
}

export function plan(root: protobuf.Root): Plan {
  const rpcs = rpcsOf(root);
  const sites = rpcs.flatMap(sitesOf);
  return { rpcs, sites, byKey: new Map(sites.map((s) => [`${s.rpc.name} ${s.path}`, s])) };
}

/** Every (RPC, path, kind) once, in the order of the proto. */
export function exhaustiveCases(p: Plan): FuzzCase[] {
  const out: FuzzCase[] = [];
  for (const s of p.sites) for (const kind of s.kinds) out.push({ n: out.length, rpc: s.rpc.name, mutations: [{ path: s.path, kind }] });
  return out;
}

/**
 * Case n of the random phase: an RPC drawn in proportion to its number of paths, then 1-3 of its
 * paths, each with a kind of its own or a random value.
 */
export function randomCase(p: Plan, seed: number, n: number): FuzzCase {
  const rng = caseRng(seed ^ 0x52414e44, n);
  const site = p.sites[rng.int(p.sites.length)] as Site;
  const own = p.sites.filter((s) => s.rpc === site.rpc);
  const count = 1 + rng.int(3);
  const mutations: Mutation[] = [];
  const used = new Set<string>();
  for (let i = 0; i < count; i++) {
    const s = i === 0 ? site : (own[rng.int(own.length)] as Site);
    if (used.has(s.path) || (i > 0 && s.leaf.kind === 'root')) continue;
    used.add(s.path);
    const kinds: Kind[] = [...s.kinds.filter((k) => k !== 'oversize' && k !== 'many'), 'random', 'random'];
    mutations.push({ path: s.path, kind: kinds[rng.int(kinds.length)] as Kind });
  }
  return { n, rpc: site.rpc.name, mutations };
}
