/**
 * The descriptor the build writes (dist/proto/descriptor.json) stands in for the .proto files at
 * start-up: it must give the same package definition, message by message and method by method.
 */
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import * as protoLoader from '@grpc/proto-loader';
import { describe, expect, it } from 'vitest';
import { LOADER_OPTIONS, loadDefinition, PROTO_DESCRIPTOR, PROTO_FILES } from '../../src/rpc/proto.ts';
import { clientConstructor } from '../../src/rpc/proto-root.ts';
import { packageRoot } from '../../src/util/package-root.ts';

/** A definition as data: message descriptors, and each method's path, streaming and types. */
function shape(def: protoLoader.PackageDefinition): Record<string, string> {
  return Object.fromEntries(
    Object.entries(def).map(([name, d]) => [
      name,
      JSON.stringify(
        'type' in d
          ? d.type
          : Object.fromEntries(
              Object.entries(d).map(([m, x]) => [
                m,
                { path: x.path, req: x.requestStream, res: x.responseStream, in: x.requestType.type, out: x.responseType.type, orig: x.originalName },
              ]),
            ),
      ),
    ]),
  );
}

describe('the build-time proto descriptor', () => {
  it('gives the same package definition as parsing the .proto files', () => {
    // npm install builds it; a checkout that was not built writes it here.
    if (!existsSync(PROTO_DESCRIPTOR)) execFileSync(process.execPath, [join(packageRoot(), 'scripts', 'build-proto-descriptor.mjs')]);
    const parsed = shape(protoLoader.loadSync(PROTO_FILES, LOADER_OPTIONS));
    const loaded = shape(loadDefinition());
    expect(Object.keys(loaded).sort()).toEqual(Object.keys(parsed).sort());
    expect(Object.keys(parsed).length).toBeGreaterThan(40);
    for (const k of Object.keys(parsed)) expect(loaded[k], k).toBe(parsed[k]);
  });
});

describe('the client classes made without proto-loader', () => {
  it('call the same methods and convert messages as proto-loader does', () => {
    const def = protoLoader.loadSync(PROTO_FILES, LOADER_OPTIONS);
    const job = {
      id: 'j-1',
      name: 'web',
      state: 'running',
      taskStates: { running: 2, pending: 1 },
      rescheduled: 3,
    };
    for (const name of ['tarcil.v1.Scheduler', 'tarcil.v1.NodeMonitor']) {
      const want = def[name] as Record<string, protoLoader.MethodDefinition<object, object>>;
      const got = clientConstructor(name).service;
      expect(Object.keys(got).sort(), name).toEqual(Object.keys(want).sort());
      for (const [m, w] of Object.entries(want)) {
        const g = got[m]!;
        expect({ path: g.path, req: g.requestStream, res: g.responseStream, orig: g.originalName }, `${name}.${m}`).toEqual({
          path: w.path,
          req: w.requestStream,
          res: w.responseStream,
          orig: w.originalName,
        });
        // An empty message both ways, and each side's bytes read back by the other.
        const bytes = w.requestSerialize({});
        expect(g.requestSerialize({}), `${name}.${m}`).toEqual(bytes);
        expect(g.responseDeserialize(w.responseSerialize({})), `${name}.${m}`).toEqual(w.responseDeserialize(w.responseSerialize({})));
      }
    }
    // Messages with a map, a repeated message and a 64-bit field, converted alike.
    const list = (def['tarcil.v1.Scheduler'] as Record<string, protoLoader.MethodDefinition<object, object>>).ListJobs!;
    const mine = clientConstructor('tarcil.v1.Scheduler').service.ListJobs!;
    const answer = { jobs: [job, { id: 'j-2' }], retainMs: 2 ** 40 + 7 };
    const wire = list.responseSerialize(answer);
    expect(mine.responseSerialize(answer)).toEqual(wire);
    expect(mine.responseDeserialize(wire)).toEqual(list.responseDeserialize(wire));
    expect((mine.responseDeserialize(wire) as { retainMs: number }).retainMs).toBe(2 ** 40 + 7);
  });
});
