/**
 * The `tarcil` command's exit codes, one for each kind of outcome a script may want to tell apart
 * (docs/cli.md, "Exit codes"). Commander's own refusals (unknown command or option, a missing or bad
 * value) are usage errors; an error raised once a command runs maps by its code.
 */
import { isTarcilError } from '../util/errors.ts';

export const EXIT = {
  /** Done; `submit --wait`: the job succeeded. Help and --version too. */
  OK: 0,
  /** Anything else that went wrong (refused by the server for another reason, an internal error). */
  FAILURE: 1,
  /** Usage: unknown command or option, a flag, argument or job spec that breaks a rule. */
  USAGE: 2,
  /** What was asked for does not exist (a job id). */
  NOT_FOUND: 3,
  /** The front-end or the store cannot be reached, or did not answer in time. */
  UNAVAILABLE: 4,
  /** `submit --wait`: the job ended without succeeding (failed or cancelled). */
  JOB_FAILED: 5,
} as const;

export type ExitCode = (typeof EXIT)[keyof typeof EXIT];

/** The exit code of an error a command raised. */
export function exitCodeFor(err: unknown): ExitCode {
  if (!isTarcilError(err)) return EXIT.FAILURE;
  switch (err.code) {
    case 'INVALID_ARGUMENT':
      return EXIT.USAGE;
    case 'NOT_FOUND':
      return EXIT.NOT_FOUND;
    case 'UNAVAILABLE':
    case 'DEADLINE_EXCEEDED':
      return EXIT.UNAVAILABLE;
    default:
      return EXIT.FAILURE;
  }
}

/**
 * An error's message as the command prints it: without the empty "Resolution note:" gRPC appends
 * to a connection error when name resolution had nothing to add.
 */
export function errorText(err: unknown): string {
  const m = err instanceof Error ? err.message : String(err);
  return m.replace(/\.?\s*Resolution note:\s*(?=([;(]|$))/g, (_, next: string) => (next === '(' ? ' ' : ''));
}
