// Types of series.js for the tests that import it (the page itself is plain JavaScript).
export function columns(pts: readonly Record<string, unknown>[], fields: readonly string[], gapS?: number): (number | null)[][];
