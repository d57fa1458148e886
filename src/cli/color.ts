/**
 * Colour in the command's output: only on a terminal, never with $NO_COLOR set (https://no-color.org)
 * or `--no-color`, and not for TERM=dumb. Tables (cli-table3 colours its header and borders) take
 * their style from here, so a table written to a pipe or a file carries no ANSI escape.
 */

/** Whether what is written to `stream` may carry colour. `--no-color` sets $NO_COLOR (main.ts). */
export function colorEnabled(stream: { isTTY?: boolean } = process.stdout, env: NodeJS.ProcessEnv = process.env): boolean {
  if (env.NO_COLOR !== undefined && env.NO_COLOR !== '') return false;
  if (env.TERM === 'dumb') return false;
  return stream.isTTY === true;
}

/** cli-table3's style for a table written to `stream`: its colours only where colour is allowed. */
export function tableStyle(stream: { isTTY?: boolean } = process.stdout): { head?: string[]; border?: string[] } {
  return colorEnabled(stream) ? {} : { head: [], border: [] };
}
