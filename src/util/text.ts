/**
 * A user's text inside a message that leaves the process (a gRPC status, whose message grpc-js
 * percent-encodes with encodeURI): it must be well-formed UTF-16. A string cut by code units can
 * end in half a surrogate pair (`'🙂'.slice(0, 1)`), and some messages of the runtime quote one
 * (JSON.parse's "Unexpected token" quotes the first code unit of an emoji); encodeURI throws on
 * either, and the status is never sent.
 */

/** `s` with each lone surrogate replaced by U+FFFD (String.prototype.toWellFormed). */
export function wellFormed(s: string): string {
  return s.replace(/[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g, '\uFFFD');
}

/** At most `max` code units of `s`, never half a surrogate pair, and well-formed. */
export function clip(s: string, max: number): string {
  let end = Math.min(s.length, max);
  if (end < s.length && end > 0) {
    const last = s.charCodeAt(end - 1);
    if (last >= 0xd800 && last <= 0xdbff) end--;
  }
  return wellFormed(s.slice(0, end));
}
