// Bundles the dashboard (web/dashboard) into dist/dashboard: app.js (Preact, htm, uPlot and the
// page's code, minified), app.css and index.html. Run by `npm run build`; the front-end serves the
// result (src/frontend/dashboard/server.ts), so nothing is fetched from the network at run time.
import { build } from 'esbuild';
import { copyFileSync, mkdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import process from 'node:process';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');

export async function buildDashboard(outDir = join(root, 'dist', 'dashboard')) {
  mkdirSync(outDir, { recursive: true });
  await build({
    entryPoints: [join(root, 'web', 'dashboard', 'app.js')],
    bundle: true,
    minify: true,
    format: 'esm',
    target: ['es2020'],
    outfile: join(outDir, 'app.js'),
    logLevel: 'warning',
    legalComments: 'none',
  });
  copyFileSync(join(root, 'web', 'dashboard', 'index.html'), join(outDir, 'index.html'));
  return outDir;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) await buildDashboard();
