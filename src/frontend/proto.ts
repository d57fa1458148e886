/**
 * Where the .proto files are and how they are loaded at run time (the generated types in gen/ come
 * from the same files).
 */
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { packageRoot } from '../util/package-root.ts';
import type { ProtoGrpcType as MonitorProto } from './gen/monitor.ts';
import type { ProtoGrpcType as SchedulerProto } from './gen/scheduler.ts';

/** proto/ at the repository root; the .proto files are the source of the generated types in gen/. */
export const PROTO_DIR = join(packageRoot(), 'proto');
export const PROTO_FILES = ['tarcil/v1/scheduler.proto', 'tarcil/v1/monitor.proto'];

/**
 * The loader options the generated types were made with (package.json `proto:gen`): camelCase
 * fields, 64-bit integers as numbers (revisions stay far below 2^53), defaults filled in on
 * output; proto3 `optional` fields keep their presence, which is how a missing field is told
 * from a zero.
 */
export const LOADER_OPTIONS: protoLoader.Options = {
  keepCase: false,
  longs: Number,
  enums: String,
  defaults: true,
  oneofs: true,
  includeDirs: [PROTO_DIR],
};

/**
 * The .proto files parsed at build time (scripts/build-proto-descriptor.mjs, run by `npm run
 * build`), in protobufjs's JSON form: loading it skips parsing the .proto files at every start.
 */
export const PROTO_DESCRIPTOR = join(packageRoot(), 'dist', 'proto', 'descriptor.json');

/** The package definition from the build's descriptor when it is at least as new as every .proto file, else from the files. */
export function loadDefinition(): protoLoader.PackageDefinition {
  try {
    const built = statSync(PROTO_DESCRIPTOR).mtimeMs;
    if (PROTO_FILES.every((f) => statSync(join(PROTO_DIR, f)).mtimeMs <= built)) {
      const { includeDirs: _dirs, ...opts } = LOADER_OPTIONS;
      return protoLoader.fromJSON(JSON.parse(readFileSync(PROTO_DESCRIPTOR, 'utf8')) as Record<string, unknown>, opts);
    }
  } catch {
    // No build (a checkout run from its sources before `npm run build`): parse the files.
  }
  return protoLoader.loadSync(PROTO_FILES, LOADER_OPTIONS);
}

let cached: { def: protoLoader.PackageDefinition; proto: SchedulerProto & MonitorProto } | undefined;

export function loadProtos(): { def: protoLoader.PackageDefinition; proto: SchedulerProto & MonitorProto } {
  if (!cached) {
    const def = loadDefinition();
    const proto = grpc.loadPackageDefinition(def) as unknown as SchedulerProto & MonitorProto;
    cached = { def, proto };
  }
  return cached;
}
