#!/usr/bin/env node
// Entry point of the `tarcil` command: the compiled tree when it is up to date (its bundle of the
// quick paths through bundle.js, with V8's code cache), else the TypeScript sources through tsx
// (see entry.js). An installed package ships only the compiled tree.
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { compiledEntry } from './entry.js';

const here = dirname(fileURLToPath(import.meta.url));
const compiled = compiledEntry(join(here, '..', '..'));
if (compiled?.endsWith('.cjs')) {
  const { runBundle } = await import('./bundle.js');
  await runBundle(dirname(compiled));
} else if (compiled) {
  await import(pathToFileURL(compiled).href);
} else if (!existsSync(join(here, 'main.ts'))) {
  process.stderr.write(
    `error: tarcil cannot start: ${join(here, '..', '..', 'dist')} holds no build${process.env.TARCIL_FROM_SOURCE ? ' and TARCIL_FROM_SOURCE asks for the TypeScript sources, which this installation does not have' : ' (npm run build)'}\n`,
  );
  process.exit(1);
} else {
  const { register } = await import('tsx/esm/api');
  register();
  await import('./main.ts');
}
