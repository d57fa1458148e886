import { expect } from 'vitest';
import { isTarcilError } from '../../src/util/errors.ts';

/** Asserts fn throws INVALID_ARGUMENT naming `field`. */
export function expectInvalid(fn: () => unknown, field: string): void {
  try {
    fn();
  } catch (e) {
    expect(isTarcilError(e, 'INVALID_ARGUMENT')).toBe(true);
    expect((e as { field?: string }).field).toBe(field);
    return;
  }
  throw new Error(`expected INVALID_ARGUMENT on ${field}`);
}
