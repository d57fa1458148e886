#!/usr/bin/env node
// Entry point of the `tarcil` command: the compiled tree when it is up to date, else the
// TypeScript sources through tsx (see entry.js).
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { compiledEntry } from './entry.js';

const compiled = compiledEntry(join(dirname(fileURLToPath(import.meta.url)), '..', '..'));
if (compiled) {
  await import(pathToFileURL(compiled).href);
} else {
  const { register } = await import('tsx/esm/api');
  register();
  await import('./main.ts');
}
