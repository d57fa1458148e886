/**
 * The directory of tarcil's package.json, found by walking up from this module, so that the same
 * code finds proto/ and profiles/ when it runs from src/ (tsx, vitest) and from the compiled
 * dist/src/ tree.
 */
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

let root: string | undefined;

export function packageRoot(): string {
  if (root) return root;
  const here = dirname(fileURLToPath(import.meta.url));
  let dir = here;
  for (;;) {
    const pkg = join(dir, 'package.json');
    if (existsSync(pkg) && (JSON.parse(readFileSync(pkg, 'utf8')) as { name?: string }).name === 'tarcil') return (root = dir);
    const parent = dirname(dir);
    if (parent === dir) throw new Error(`tarcil's package.json was not found above ${here}`);
    dir = parent;
  }
}

/** The package's version, from its package.json (`tarcil --version`). */
export function packageVersion(): string {
  return (JSON.parse(readFileSync(join(packageRoot(), 'package.json'), 'utf8')) as { version: string }).version;
}
