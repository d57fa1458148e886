// Types of fold.js for the tests that import it (the page itself is plain JavaScript).
export interface Run<T> {
  key: string;
  item: T;
  count: number;
  first: number;
  last: number;
}
export function foldRuns<T>(items: readonly T[], keyOf: (item: T) => string): Run<T>[];
export function foldSamples<T extends { r?: number; f?: number; candidates?: number }>(samples: readonly T[] | undefined): Run<T>[];
export function foldAdmission<T extends { action?: string; reason?: string }>(verdicts: readonly T[] | undefined): Run<T>[];
export function foldEvents<T extends { state?: string; tasks?: string; message?: string }>(events: readonly T[] | undefined): Run<T>[];
export function span(g: { count: number; first: number; last: number }, noun: string): string;
export function currentReason(e: Record<string, unknown> | undefined, summary: Record<string, unknown> | undefined): { kind: string; text: string } | null;
