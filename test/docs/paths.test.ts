/**
 * The documentation shows only what exists: every file path, link and heading anchor, every
 * `tarcil <command>` and every `npm run <script>` that README.md, docs/*.md, bench/README.md and
 * bench/HISTORY.md show. The commands come from the program itself (`tarcil --help`, and each
 * command's own help for its subcommands), the scripts from package.json.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { beforeAll, describe, expect, it } from 'vitest';
import { anchorsOf, check, commandsInHelp, refsOf, slug, type CliCommands } from './doc-refs.ts';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const BIN = join(ROOT, 'src', 'cli', 'bin.js');

const DOCS = [
  'README.md',
  'bench/README.md',
  'bench/HISTORY.md',
  ...readdirSync(join(ROOT, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .map((f) => `docs/${f}`),
];

function help(args: string[]): string {
  const r = spawnSync(process.execPath, [BIN, ...args, '--help'], { encoding: 'utf8', env: { ...process.env, NO_COLOR: '1', TARCIL_LOG: 'silent' } });
  if (r.status !== 0) throw new Error(`tarcil ${args.join(' ')} --help exited ${String(r.status)}: ${r.stderr}`);
  return r.stdout;
}

let cli: CliCommands;
let scripts: Set<string>;

beforeAll(() => {
  const commands = new Map<string, Set<string>>();
  for (const c of commandsInHelp(help([]))) {
    const own = help([c]);
    // A command with subcommands says so in its usage line: `Usage: tarcil node [options] [command]`.
    const subs = /^Usage: tarcil \S+ \[options\] \[command\]/m.test(own) ? commandsInHelp(own.slice(own.indexOf('Commands:'))) : [];
    commands.set(c, new Set(subs));
  }
  cli = { commands };
  const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string> };
  scripts = new Set(Object.keys(pkg.scripts));
}, 60_000);

describe('the documentation names only what exists', () => {
  it('reads the command list from the program', () => {
    for (const c of ['up', 'server', 'submit', 'explain', 'node', 'acl']) expect(cli.commands.has(c)).toBe(true);
    expect([...(cli.commands.get('node') ?? [])]).toEqual(expect.arrayContaining(['cordon', 'uncordon', 'drain']));
    expect(cli.commands.get('submit')?.size).toBe(0);
  });

  it.each(DOCS)('%s', (doc) => {
    const problems = check(join(ROOT, doc), ROOT, cli, scripts);
    expect(problems.map((p) => `${p.file}:${p.line}: ${p.what}`)).toEqual([]);
  });

  it('the README keeps its two set-up commands', () => {
    const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
    expect(readme).toContain('npm install && npm start');
    expect(readme).toMatch(/^npm test\b/m);
  });
});

describe('the check itself', () => {
  it('finds paths, links, anchors, commands and scripts in code and links only', () => {
    const refs = refsOf(
      [
        'See `src/cli/program.ts`, [ops](docs/operations.md#limits) and [here](#top).',
        'Prose naming tarcil frobnicate is not code.',
        '```sh',
        'npx tarcil submit profiles/jobs/spark-lr.json --wait',
        'npm run schema:gen && npx tsx bench/cli-start.ts',
        '```',
      ].join('\n'),
    );
    expect(refs.map((r) => `${r.kind} ${r.text}`)).toEqual([
      'link docs/operations.md#limits',
      'anchor #top',
      'path src/cli/program.ts',
      'path profiles/jobs/spark-lr.json',
      'command submit profiles',
      'path bench/cli-start.ts',
      'script schema:gen',
    ]);
  });

  it('reports a missing file, a missing heading, an unknown command, subcommand and script', () => {
    const dir = mkdtempSync(join(tmpdir(), 'tarcil-docs-'));
    try {
      const doc = join(dir, 'doc.md');
      writeFileSync(
        doc,
        [
          '# Top',
          '',
          'Run `bench/no-such-bench.ts` and `src/cli/program.ts`; see [a](#top), [b](#nowhere) and',
          `[c](${join(ROOT, 'README.md')}#no-such-heading).`,
          '',
          '```sh',
          'tarcil sumbit job.json',
          'tarcil node evict s0001',
          'tarcil status|jobs -o json',
          'npm run no-such-script',
          'node_modules/.bin/tarcil frobnicate',
          '```',
        ].join('\n'),
      );
      const problems = check(doc, ROOT, cli, scripts).map((p) => `${p.line}: ${p.what}`);
      expect(problems).toEqual([
        '3: link to a missing heading: #nowhere',
        `4: link to a missing heading: ${join(ROOT, 'README.md')}#no-such-heading`,
        '3: no file or folder bench/no-such-bench.ts',
        '7: tarcil has no command sumbit (in `tarcil sumbit job`)',
        '8: tarcil node has no command evict',
        '10: package.json has no script no-such-script',
        '11: tarcil has no command frobnicate (in `tarcil frobnicate`)',
      ]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('makes GitHub anchors of headings', () => {
    expect(slug("Retention, compaction and etcd's space")).toBe('retention-compaction-and-etcds-space');
    expect(slug('Hollow nodes: a 10,000-node cell on one machine')).toBe('hollow-nodes-a-10000-node-cell-on-one-machine');
    expect(slug("`command` and the task's environment")).toBe('command-and-the-tasks-environment');
    expect([...anchorsOf('# A\n## A\n```\n# not a heading\n```\n')]).toEqual(['a', 'a-1']);
  });
});
