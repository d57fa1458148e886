// Writes schema/jobspec.schema.json from the job spec's zod schema (npm run schema:gen).
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { JOBSPEC_SCHEMA_PATH, jobSpecJsonSchemaText } from '../src/model/jobspec-json-schema.ts';

const file = join(import.meta.dirname, '..', JOBSPEC_SCHEMA_PATH);
writeFileSync(file, jobSpecJsonSchemaText());
process.stdout.write(`wrote ${file}\n`);
