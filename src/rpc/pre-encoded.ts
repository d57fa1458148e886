/**
 * Messages encoded once and sent as they are: an event of a watched job reaches every watcher as
 * the same bytes, instead of being serialized again for each stream.
 *
 * grpc-js serializes a server stream's messages with the service definition's
 * `responseSerialize`; `passEncoded` makes that pass a pre-encoded message's bytes through
 * untouched. A pre-encoded message is also an ordinary message object (its fields decode the bytes
 * when first read), so a serializer that was not told about it, or a test's stand-in for a call,
 * still gets the right message.
 */
import type * as grpc from '@grpc/grpc-js';

export const ENCODED: unique symbol = Symbol('tarcil.encoded');

/** A message with its encoding: `[ENCODED]` holds the protobuf bytes. */
export interface PreEncoded {
  readonly [ENCODED]: Buffer;
}

export function isPreEncoded(v: unknown): v is PreEncoded {
  return v !== null && typeof v === 'object' && Buffer.isBuffer((v as Partial<PreEncoded>)[ENCODED]);
}

/** Makes every server-streaming method of `service` send pre-encoded messages as their bytes. */
export function passEncoded(service: grpc.ServiceDefinition): void {
  for (const m of Object.values(service)) {
    if (!m.responseStream) continue;
    const encode = m.responseSerialize;
    m.responseSerialize = (v: unknown) => (isPreEncoded(v) ? v[ENCODED] : encode(v));
  }
}
