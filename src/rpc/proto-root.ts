/**
 * The .proto files as protobufjs reflection, and gRPC client constructors made from it without
 * @grpc/proto-loader: what a client (the command line) needs to call a service. proto-loader also
 * turns every message into a descriptor for server reflection, which a client never uses and which
 * costs a good part of a command's start; the daemons load it (proto.ts).
 *
 * A call's messages are converted exactly as proto-loader converts them (LOADER_OPTIONS): a request
 * is `fromObject` then `encode`, a response `decode` then `toObject` with the loader's options.
 */
import * as grpc from '@grpc/grpc-js';
import protobuf from 'protobufjs';
import { readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { packageRoot } from '../util/package-root.ts';

/** proto/ at the repository root; the .proto files are the source of the generated types in gen/. */
export const PROTO_DIR = join(packageRoot(), 'proto');
export const PROTO_FILES = ['tarcil/v1/scheduler.proto', 'tarcil/v1/monitor.proto'];

/**
 * The loader options the generated types were made with (package.json `proto:gen`): camelCase
 * fields, 64-bit integers as numbers (revisions stay far below 2^53), defaults filled in on
 * output; proto3 `optional` fields keep their presence, which is how a missing field is told
 * from a zero.
 */
export const LOADER_OPTIONS = {
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

/** The build's descriptor (JSON) when it is at least as new as every .proto file, else undefined. */
export function builtDescriptor(): Record<string, unknown> | undefined {
  try {
    const built = statSync(PROTO_DESCRIPTOR).mtimeMs;
    if (PROTO_FILES.every((f) => statSync(join(PROTO_DIR, f)).mtimeMs <= built))
      return JSON.parse(readFileSync(PROTO_DESCRIPTOR, 'utf8')) as Record<string, unknown>;
  } catch {
    // No build (a checkout run from its sources before `npm run build`).
  }
  return undefined;
}

let root: protobuf.Root | undefined;

/**
 * The services and messages of proto/: from the build's descriptor (resolved by Root.fromJSON),
 * else parsed from the files (not resolved: a client resolves its service, a walk over every field
 * calls resolveAll()).
 */
export function protoRoot(): protobuf.Root {
  if (!root) {
    const json = builtDescriptor();
    let r: protobuf.Root;
    if (json) r = protobuf.Root.fromJSON(json);
    else {
      r = new protobuf.Root();
      r.resolvePath = (_origin: string, target: string) => join(PROTO_DIR, target);
      r.loadSync(PROTO_FILES, { keepCase: false });
    }
    root = r;
  }
  return root;
}

const { includeDirs: _dirs, ...CONVERT } = LOADER_OPTIONS;

function serializer(t: protobuf.Type): (arg: object) => Buffer {
  return (arg) => {
    if (Array.isArray(arg)) throw new Error(`Failed to serialize message: expected object with ${t.name} structure, got array instead`);
    const bytes = t.encode(t.fromObject(arg)).finish();
    return Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  };
}

function deserializer(t: protobuf.Type): (buf: Buffer) => object {
  return (buf) => t.toObject(t.decode(buf), CONVERT);
}

const lowerFirst = (s: string): string => s.charAt(0).toLowerCase() + s.slice(1);

const constructors = new Map<string, grpc.ServiceClientConstructor>();

/** The gRPC client class of a service of proto/ (e.g. `tarcil.v1.Scheduler`), as grpc.loadPackageDefinition would make it. */
export function clientConstructor(service: string): grpc.ServiceClientConstructor {
  let ctor = constructors.get(service);
  if (!ctor) {
    const svc = protoRoot().lookupService(service);
    svc.resolveAll();
    const def: Record<string, grpc.MethodDefinition<object, object>> = {};
    for (const m of svc.methodsArray) {
      const req = m.resolvedRequestType!;
      const res = m.resolvedResponseType!;
      def[m.name] = {
        path: `/${service}/${m.name}`,
        requestStream: !!m.requestStream,
        responseStream: !!m.responseStream,
        requestSerialize: serializer(req),
        requestDeserialize: deserializer(req),
        responseSerialize: serializer(res),
        responseDeserialize: deserializer(res),
        // proto-loader's camelCase of the method name; the names of proto/ are PascalCase words.
        originalName: lowerFirst(m.name),
      };
    }
    ctor = grpc.makeClientConstructor(def, service.slice(service.lastIndexOf('.') + 1), {});
    constructors.set(service, ctor);
  }
  return ctor;
}
