/**
 * Polls a condition until it holds, for tests that wait on something another process or the
 * store does: every `everyMs`, failing with `timed out waiting for <what>` after `ms`.
 */
export async function until(what: string, cond: () => boolean | Promise<boolean>, ms = 10_000, everyMs = 20): Promise<void> {
  const end = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}
