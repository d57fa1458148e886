/**
 * The command line's protobufjs functions generated at build time (scripts/proto-codegen.mjs): a
 * type of proto/ takes exactly the functions protobufjs would generate at run time, without
 * generating them; a type whose definition is not the one they were generated from is set up by
 * protobufjs as usual.
 */
import protobuf from 'protobufjs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
// @ts-expect-error -- a plain ES module of the build (scripts/), without types
import { protoCodegenSource } from '../../scripts/proto-codegen.mjs';
import { LOADER_OPTIONS } from '../../src/rpc/proto-root.ts';

const PROTO = fileURLToPath(new URL('../../proto', import.meta.url));
const FILES = ['tarcil/v1/scheduler.proto', 'tarcil/v1/monitor.proto'];

// Installed on this test file's protobufjs, as vendor.cjs installs it on its own.
const mod = { exports: {} as unknown };
const load = new Function('module', 'exports', (protoCodegenSource as (dir: string) => string)(PROTO)) as (m: typeof mod, e: unknown) => void; // eslint-disable-line @typescript-eslint/no-implied-eval
load(mod, mod.exports);
(mod.exports as (p: typeof protobuf) => void)(protobuf);

/** Calls of protobufjs's code generator while `f` runs. */
function generated(f: () => void): number {
  const util = protobuf.util as unknown as { codegen: (...a: unknown[]) => unknown };
  const real = util.codegen;
  let n = 0;
  util.codegen = (...a: unknown[]) => {
    n++;
    return real(...a);
  };
  try {
    f();
  } finally {
    util.codegen = real;
  }
  return n;
}

function types(ns: protobuf.NamespaceBase, out: protobuf.Type[] = []): protobuf.Type[] {
  for (const x of ns.nestedArray) {
    if (x instanceof protobuf.Type) out.push(x);
    if (x instanceof protobuf.Namespace) types(x, out);
  }
  return out;
}

/** proto/ as the command line loads it: the build's JSON form. */
function rootFromJson(edit?: (json: { nested: Record<string, unknown> }) => void): protobuf.Root {
  const parsed = new protobuf.Root();
  parsed.resolvePath = (_o: string, target: string) => `${PROTO}/${target}`;
  parsed.loadSync(FILES, { keepCase: false });
  const json = JSON.parse(JSON.stringify(parsed.toJSON({ keepComments: false }))) as { nested: Record<string, unknown> };
  edit?.(json);
  return protobuf.Root.fromJSON(json as protobuf.INamespace);
}

describe('protobufjs functions generated at build time', () => {
  it('every message of proto/ takes them, the same functions protobufjs generates, and nothing is generated', () => {
    const root = rootFromJson();
    const all = types(root);
    expect(all.length).toBeGreaterThan(40);
    expect(generated(() => all.forEach((t) => t.setup()))).toBe(0);
    for (const t of all) {
      expect(t.encode.toString(), t.fullName).toBe(protobuf.encoder(t).toString());
      expect(t.decode.toString(), t.fullName).toBe(protobuf.decoder(t).toString());
      expect(t.toObject.toString(), t.fullName).toBe(protobuf.converter.toObject(t).toString());
      expect(t.fromObject.toString(), t.fullName).toBe(protobuf.converter.fromObject(t).toString());
    }
    // A message through them: nested messages, maps, repeated fields, 64-bit integers, optional fields.
    const job = root.lookupType('tarcil.v1.Job');
    const input = {
      id: 'j1',
      name: 'n',
      state: 'running',
      tasks: 2,
      taskStates: { running: 1, queued: 1 },
      taskList: [{ index: 0, state: 'running', ru: { server: 's1', index: 3 }, attempt: 1, previous: [{ attempt: 0, state: 'lost' }] }],
      submittedAtMs: 1_700_000_000_123,
    };
    const { includeDirs: _dirs, ...convert } = LOADER_OPTIONS;
    const out = job.toObject(job.decode(job.encode(job.fromObject(input)).finish()), convert);
    expect(out).toMatchObject(input);
    const verdict = root.lookupType('tarcil.v1.AdmissionVerdict');
    expect(verdict.toObject(verdict.decode(verdict.encode(verdict.fromObject({ action: 'queue', estimateMs: 0 })).finish()), convert)).toMatchObject({
      action: 'queue',
      estimateMs: 0,
    });
    expect(verdict.toObject(verdict.decode(verdict.encode(verdict.fromObject({ action: 'queue' })).finish()), convert)).not.toHaveProperty('estimateMs');
  });

  it('a type defined otherwise is set up by protobufjs', () => {
    const root = rootFromJson((json) => {
      const v1 = ((json.nested.tarcil as { nested: Record<string, unknown> }).nested.v1 as { nested: Record<string, { fields: Record<string, unknown> }> })
        .nested;
      v1.RuRef!.fields.extra = { type: 'string', id: 99 };
    });
    const ru = root.lookupType('tarcil.v1.RuRef');
    expect(generated(() => ru.setup())).toBeGreaterThan(0);
    expect(ru.toObject(ru.decode(ru.encode(ru.fromObject({ server: 's1', index: 2, extra: 'x' })).finish()))).toEqual({ server: 's1', index: 2, extra: 'x' });
    // Its neighbours are unchanged: theirs.
    expect(generated(() => root.lookupType('tarcil.v1.LoadReport').setup())).toBe(0);
  });
});
