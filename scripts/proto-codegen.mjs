// protobufjs's generated functions of every message of proto/ (encode, decode, verify, fromObject,
// toObject), written at build time as the source of one CommonJS module that the command line's
// vendor.cjs holds (scripts/build-cli.mjs): a client command then neither generates nor compiles
// them at start (protobufjs builds them with `new Function` the first time a type is used, and
// vendor.cjs comes with V8's code cache).
//
// The module exports install(protobuf): from then on a type set up whose definition (its toJSON)
// is the one the functions were generated from takes them; any other type is set up by
// protobufjs as usual.
import protobuf from 'protobufjs';
import { join } from 'node:path';

const FILES = ['tarcil/v1/scheduler.proto', 'tarcil/v1/monitor.proto'];

/** Every message type under a namespace. */
function typesOf(ns, out = []) {
  for (const x of ns.nestedArray) {
    if (x instanceof protobuf.Type) out.push(x);
    if (x.nestedArray) typesOf(x, out);
  }
  return out;
}

/** A generated function as a factory of its scope (what protobufjs passes to `new Function`). */
const factory = (gen) => `function (Writer, Reader, types, util) { return ${gen.toString()}; }`;

/** The module's source, from the .proto files under protoDir. */
export function protoCodegenSource(protoDir) {
  const root = new protobuf.Root();
  root.resolvePath = (_origin, target) => join(protoDir, target);
  root.loadSync(FILES, { keepCase: false });
  root.resolveAll();
  const entries = typesOf(root).map(
    (t) =>
      `${JSON.stringify(t.fullName)}: { def: ${JSON.stringify(JSON.stringify(t.toJSON()))}, encode: ${factory(protobuf.encoder(t))}, decode: ${factory(protobuf.decoder(t))}, verify: ${factory(protobuf.verifier(t))}, fromObject: ${factory(protobuf.converter.fromObject(t))}, toObject: ${factory(protobuf.converter.toObject(t))} }`,
  );
  return `"use strict";
const TABLE = {
${entries.join(',\n')}
};
module.exports = function install(protobuf) {
  const Type = protobuf.Type;
  const setup = Type.prototype.setup;
  Type.prototype.setup = function staticSetup() {
    const f = Object.prototype.hasOwnProperty.call(TABLE, this.fullName) ? TABLE[this.fullName] : undefined;
    if (!f || protobuf.wrappers[this.fullName] || JSON.stringify(this.toJSON()) !== f.def) return setup.call(this);
    const types = [];
    for (let i = 0; i < this.fieldsArray.length; ++i) types.push(this._fieldsArray[i].resolve().resolvedType);
    const { Writer, Reader, util } = protobuf;
    this.encode = f.encode(Writer, Reader, types, util);
    this.decode = f.decode(Writer, Reader, types, util);
    this.verify = f.verify(Writer, Reader, types, util);
    this.fromObject = f.fromObject(Writer, Reader, types, util);
    this.toObject = f.toObject(Writer, Reader, types, util);
    return this;
  };
};
`;
}
