/**
 * Maps keyed by names a user chose: server and constraint attributes, environment variables,
 * platforms in a profile, namespaces in a policy. On a plain object such a name may be a member
 * of Object.prototype: `attrs['constructor']` is a function, `attrs['toString']` too, and
 * `obj['__proto__'] = v` replaces the prototype instead of adding a key. So these maps are read
 * by own key only (`own`), built without a prototype (`dict`), and the key `__proto__` is refused
 * where they are validated (model/schema.ts): JSON.parse keeps it as an ordinary key, but zod and
 * every `obj[k] = v` copy would drop it without a word.
 */

/** The one key a user-keyed map may not have. */
export const RESERVED_KEY = '__proto__';

/** The rule a map holding RESERVED_KEY breaks, for messages. */
export const RESERVED_KEY_RULE = `key '${RESERVED_KEY}' is not allowed`;

/** The value under `key` when it is the map's own, undefined otherwise (never Object.prototype's). */
export function own<V>(map: Readonly<Record<string, V>> | undefined, key: string): V | undefined {
  return map !== undefined && Object.hasOwn(map, key) ? map[key] : undefined;
}

/** Whether `key` is the map's own key. */
export function hasOwnKey(map: Readonly<Record<string, unknown>> | undefined, key: string): boolean {
  return map !== undefined && Object.hasOwn(map, key);
}

/**
 * A copy of the map's own enumerable entries in an object without a prototype: a key it lacks
 * reads as undefined, and assigning `__proto__` to it adds an ordinary key.
 */
export function dict<V>(src?: Readonly<Record<string, V>>): Record<string, V> {
  const out = Object.create(null) as Record<string, V>;
  if (src) for (const k of Object.keys(src)) out[k] = src[k] as V;
  return out;
}

/** Whether `v` is an object that holds RESERVED_KEY as its own key. */
export function hasReservedKey(v: unknown): boolean {
  return typeof v === 'object' && v !== null && Object.hasOwn(v, RESERVED_KEY);
}
