/**
 * The JSON Schema of a job spec file (schema/jobspec.schema.json), generated from the zod schema
 * that validates every submission (schema.ts) with zod's own z.toJSONSchema, so the two cannot
 * disagree on a field, a type, a range or a pattern. What JSON Schema cannot say is checked by
 * tarcil only: names in the catalog (profiles, platforms) and the rules between fields
 * (scaleOut.maxTasks ≥ tasks, no scaleOut with a gang); the one that editors can check, a duration
 * or a command, is added as an anyOf. `npm run schema:gen` writes the file; a test checks that the
 * committed one is current.
 */
import { z } from 'zod';
import { jobSpecInputSchema } from './schema.ts';

/** Where the schema is published in the repository (and its $id there). */
export const JOBSPEC_SCHEMA_PATH = 'schema/jobspec.schema.json';

export function jobSpecJsonSchema(): Record<string, unknown> {
  const generated = z.toJSONSchema(jobSpecInputSchema, { io: 'input', target: 'draft-2020-12', override: keepDefault }) as Record<string, unknown>;
  const { $schema, ...rest } = generated;
  return {
    $schema,
    title: 'tarcil job spec',
    description:
      "A job spec file for `tarcil submit` (examples in profiles/jobs/, fields in profiles/README.md). Generated from src/model/schema.ts by `npm run schema:gen`; `tarcil validate <file>` checks a spec with the same rules and the catalog's names.",
    ...rest,
    anyOf: [{ required: ['durationMs'] }, { required: ['command'] }],
  };
}

/**
 * A map keyed by the user's names is checked by a zod preprocess (its `__proto__` guard,
 * schema.ts userRecord); zod counts a preprocess as a transform and so leaves out of an input
 * schema the default of every object that holds such a map (`constraints`). Those defaults are
 * what the spec as written gets, so they are put back.
 */
function keepDefault(ctx: { zodSchema: z.core.$ZodTypes; jsonSchema: z.core.JSONSchema.BaseSchema }): void {
  const def = ctx.zodSchema._zod.def;
  const json = ctx.jsonSchema;
  if (def.type !== 'default' || json.default !== undefined) return;
  // First, where zod writes a default it keeps.
  const rest = { ...json };
  for (const k of Object.keys(rest)) delete json[k];
  Object.assign(json, { default: JSON.parse(JSON.stringify(def.defaultValue)) as unknown }, rest);
}

/** The file's text: the schema, two-space JSON, a final newline. */
export function jobSpecJsonSchemaText(): string {
  return `${JSON.stringify(jobSpecJsonSchema(), null, 2)}\n`;
}
