/** A job spec file as `tarcil submit` and `tarcil validate` read it. */
import { readFileSync } from 'node:fs';
import { invalid } from '../util/errors.ts';

/** The job spec's text: the file, or stdin for `-`. */
export function readSpec(file: string): string {
  const stdin = file === '-';
  if (stdin && process.stdin.isTTY) process.stderr.write('reading the job spec from stdin (end it with Ctrl-D)\n');
  let text: string;
  try {
    text = readFileSync(stdin ? 0 : file, 'utf8');
  } catch (e) {
    const err = e as NodeJS.ErrnoException;
    throw invalid('<spec.json>', `cannot read ${stdin ? 'stdin' : `'${file}'`} (${err.code ?? err.message})`);
  }
  // An empty file would otherwise reach the front-end as no spec at all, and its answer names
  // the request's fields, not the file.
  if (text.trim() === '') throw invalid('<spec.json>', `${stdin ? 'stdin' : `'${file}'`} is empty: a job spec is a JSON object (see profiles/jobs/)`);
  return text;
}
