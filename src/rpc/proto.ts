/**
 * How the daemons load the .proto files at run time (the generated types in gen/ come from the
 * same files): through @grpc/proto-loader, whose package definition also serves server reflection.
 * Clients use proto-root.ts, which makes the same client classes without it.
 */
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { passEncoded } from './pre-encoded.ts';
import { builtDescriptor, LOADER_OPTIONS, PROTO_FILES } from './proto-root.ts';
import type { ProtoGrpcType as MonitorProto } from './gen/monitor.ts';
import type { ProtoGrpcType as SchedulerProto } from './gen/scheduler.ts';

export { LOADER_OPTIONS, PROTO_DESCRIPTOR, PROTO_DIR, PROTO_FILES } from './proto-root.ts';

/** The package definition from the build's descriptor when it is at least as new as every .proto file, else from the files. */
export function loadDefinition(): protoLoader.PackageDefinition {
  const json = builtDescriptor();
  if (json) {
    const { includeDirs: _dirs, ...opts } = LOADER_OPTIONS;
    return protoLoader.fromJSON(json, opts);
  }
  // No build (a checkout run from its sources before `npm run build`): parse the files.
  return protoLoader.loadSync(PROTO_FILES, LOADER_OPTIONS);
}

let cached: { def: protoLoader.PackageDefinition; proto: SchedulerProto & MonitorProto } | undefined;

export function loadProtos(): { def: protoLoader.PackageDefinition; proto: SchedulerProto & MonitorProto } {
  if (!cached) {
    const def = loadDefinition();
    const proto = grpc.loadPackageDefinition(def) as unknown as SchedulerProto & MonitorProto;
    // WatchJob's events are encoded once for all the watchers of a job (job-watch.ts).
    passEncoded(proto.tarcil.v1.Scheduler.service);
    cached = { def, proto };
  }
  return cached;
}
