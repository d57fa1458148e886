/**
 * `tarcil validate <spec.json|->`: a job spec checked as the front-end checks a submission (the
 * zod schema of src/model/schema.ts, profile and platform names looked up in this installation's
 * catalog under profiles/), without a front-end. OK on stdout and exit code 0, or each problem on
 * stderr as `<file>: <field>: <rule>` and exit code 2 (a usage error, as a refused submission).
 */
import { loadCatalog, jobSchemaFor } from '../model/catalog.ts';
import { validateJobSpec } from '../model/schema.ts';
import { EXIT, type ExitCode } from './exit-codes.ts';
import { readSpec } from './spec-file.ts';

export interface ValidateFlags {
  /** false (--no-catalog): the schema alone, names not looked up. */
  catalog: boolean;
  json: boolean;
}

export function validateCommand(file: string, o: ValidateFlags, out: (s: string) => void, err: (s: string) => void): ExitCode {
  const name = file === '-' ? '<stdin>' : file;
  const text = readSpec(file);
  let input: unknown;
  try {
    input = JSON.parse(text);
  } catch (e) {
    const issues = [{ field: '(root)', rule: `is not JSON: ${(e as Error).message}` }];
    if (o.json) out(JSON.stringify({ file: name, valid: false, issues }));
    else err(`${name}: ${issues[0]?.field}: ${issues[0]?.rule}`);
    return EXIT.USAGE;
  }
  const r = o.catalog ? validateJobSpec(input, jobSchemaFor(loadCatalog())) : validateJobSpec(input);
  if (o.json) {
    out(JSON.stringify(r.ok ? { file: name, valid: true } : { file: name, valid: false, issues: r.issues }));
    return r.ok ? EXIT.OK : EXIT.USAGE;
  }
  if (r.ok) {
    const v = r.value;
    out(
      `OK: ${name} is a valid job spec (${v.name}: ${v.tasks} task${v.tasks === 1 ? '' : 's'} of ${typeof v.profile === 'string' ? v.profile : (v.profile.name ?? 'an inline profile')}, ${v.mode})`,
    );
    return EXIT.OK;
  }
  for (const i of r.issues) err(`${name}: ${i.field}: ${i.rule}`);
  err(`${name}: ${r.issues.length} problem${r.issues.length === 1 ? '' : 's'}; the rules: schema/jobspec.schema.json, profiles/README.md`);
  return EXIT.USAGE;
}
