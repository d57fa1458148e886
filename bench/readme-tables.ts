// bench/README.md's simulator tables from the committed results files.
//
//   npx tsx bench/readme-tables.ts --check   exit 1 naming each block that differs from its results
//   npx tsx bench/readme-tables.ts --write   rewrite every block from its results
//
// Options: --readme PATH (default bench/README.md), --results DIR (default bench/results).

import { readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { checkBlocks, findBlocks, firstDifference, loadResults, renderBlocks, TABLES } from './lib/readme-tables.ts';

const here = dirname(fileURLToPath(import.meta.url));
const { values } = parseArgs({
  options: {
    check: { type: 'boolean', default: false },
    write: { type: 'boolean', default: false },
    readme: { type: 'string', default: join(here, 'README.md') },
    results: { type: 'string', default: join(here, 'results') },
  },
});

if (values.check === values.write) {
  console.error('readme-tables: give exactly one of --check or --write');
  process.exit(2);
}

const text = readFileSync(values.readme, 'utf8');
const used = new Set(findBlocks(text).map((b) => b.id));
const results = loadResults(
  values.results,
  TABLES.filter((t) => used.has(t.id)),
);

if (values.write) {
  const out = renderBlocks(text, results);
  if (out !== text) writeFileSync(values.readme, out);
  console.log(`readme-tables: ${out === text ? 'no block changed' : 'rewrote'} in ${values.readme} (${used.size} blocks)`);
}
const diffs = checkBlocks(values.write ? readFileSync(values.readme, 'utf8') : text, results);
for (const d of diffs) {
  const detail = d.problem === 'differs' ? `: ${firstDifference(d.expected ?? '', d.actual ?? '')}` : '';
  console.error(`readme-tables: block "${d.id}" ${d.problem}${detail}`);
}
if (diffs.length > 0) {
  console.error(`readme-tables: ${diffs.length} block(s) disagree with bench/results; run npx tsx bench/readme-tables.ts --write`);
  process.exit(1);
}
if (values.check) console.log(`readme-tables: ${used.size} blocks agree with their results files`);
