/** Types of bundle.js (plain JavaScript: bin.js runs it before any TypeScript loader exists). */
export const SHARED_FROM_TREE: readonly string[];
export function loadBundle(file: string): Promise<{ runCli(argv: string[]): Promise<void> }>;
export function runBundle(distCli: string, argv?: string[]): Promise<void>;
