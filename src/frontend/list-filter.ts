/**
 * The namespaces a ListJobs call over every namespace may read, when its token may not read them
 * all: set by the auth layer (auth.ts) before the handler runs, so that the handler leaves the
 * others out before it cuts the list at its limit and counts its total (a total counted before
 * would tell how many jobs the caller may not see).
 */
const readable = new WeakMap<object, (namespace: string) => boolean>();

export function setReadableNamespaces(call: object, may: (namespace: string) => boolean): void {
  readable.set(call, may);
}

/** The call's filter, if the auth layer set one. */
export function readableNamespaces(call: object): ((namespace: string) => boolean) | undefined {
  return readable.get(call);
}
