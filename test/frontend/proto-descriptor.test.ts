/**
 * The descriptor the build writes (dist/proto/descriptor.json) stands in for the .proto files at
 * start-up: it must give the same package definition, message by message and method by method.
 */
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import * as protoLoader from '@grpc/proto-loader';
import { describe, expect, it } from 'vitest';
import { LOADER_OPTIONS, loadDefinition, PROTO_DESCRIPTOR, PROTO_FILES } from '../../src/frontend/proto.ts';
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
