/** Types of entry.js (plain JavaScript: bin.js runs it before any TypeScript loader exists). */
export function newestSource(dir: string): number;
export function compiledEntry(root: string, env?: Record<string, string | undefined>): string | undefined;
