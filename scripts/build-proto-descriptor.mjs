// Writes dist/proto/descriptor.json: the .proto files of proto/ parsed once, at build time, into
// protobufjs's JSON form. The processes and the command line load it (src/rpc/proto.ts)
// instead of parsing the .proto files at every start; run by `npm run build`.
import protobuf from 'protobufjs';
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const files = ['tarcil/v1/scheduler.proto', 'tarcil/v1/monitor.proto'];

const r = new protobuf.Root();
r.resolvePath = (_origin, target) => join(root, 'proto', target);
r.loadSync(files, { keepCase: false });
r.resolveAll();
const out = join(root, 'dist', 'proto', 'descriptor.json');
mkdirSync(dirname(out), { recursive: true });
writeFileSync(out, JSON.stringify(r.toJSON({ keepComments: false })));
