/**
 * What a Markdown document shows that must exist: the file paths of its links and of its code
 * (inline spans and fenced blocks), the `tarcil <command>` lines and the `npm run <script>` /
 * `npm start|test` lines of its code, and the anchors of its links to Markdown files. Only code
 * is read for paths and commands: prose may name a command in passing ("`tarcil up`'s monitors"),
 * code is what a reader copies.
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';

/** The top folders of the repository whose paths a document may name in its code. */
const PATH_ROOTS = ['src', 'test', 'bench', 'docs', 'profiles', 'proto', 'schema', 'scripts', 'deploy', 'web', '.ci'];
/** A path in code: one of PATH_ROOTS (or, inside bench/, `results/`), then path characters. */
const CODE_PATH_RE = new RegExp(`(?<![\\w./<>$~-])((?:${PATH_ROOTS.map((r) => r.replace('.', '\\.')).join('|')}|results)/[\\w.*/-]*)`, 'g');
const LINK_RE = /!?\[[^\]]*\]\(([^)\s]+)\)/g;
/** `tarcil <command>`, also as `node_modules/.bin/tarcil <command>`, but not `x/tarcil` or `tarcil-monitor`. */
const TARCIL_RE = /(?<![\w.-])(?<!(?<!\.bin)\/)tarcil((?: +(?:[a-z][\w-]*(?:\\?\|[a-z][\w-]*)*)){1,2})/g;
const NPM_RE = /(?<![\w-])npm (run(?: -s)? ([\w:-]+)|start|test)\b/g;

export interface Ref {
  kind: 'path' | 'link' | 'anchor' | 'command' | 'script';
  /** What the document shows. */
  text: string;
  line: number;
}

/** A document's code, line by line: fenced blocks whole, and the inline code spans of the rest. */
export function codeOf(markdown: string): { text: string; line: number }[] {
  const out: { text: string; line: number }[] = [];
  let fenced = false;
  markdown.split('\n').forEach((l, i) => {
    if (/^\s*```/.test(l)) {
      fenced = !fenced;
      return;
    }
    if (fenced) out.push({ text: l, line: i + 1 });
    else for (const m of l.matchAll(/`([^`]+)`/g)) out.push({ text: m[1] ?? '', line: i + 1 });
  });
  return out;
}

/** The prose of a document (fenced blocks left out), line by line, for its links. */
function proseLines(markdown: string): { text: string; line: number }[] {
  const out: { text: string; line: number }[] = [];
  let fenced = false;
  markdown.split('\n').forEach((l, i) => {
    if (/^\s*```/.test(l)) fenced = !fenced;
    else if (!fenced) out.push({ text: l, line: i + 1 });
  });
  return out;
}

export function refsOf(markdown: string): Ref[] {
  const refs: Ref[] = [];
  for (const { text, line } of proseLines(markdown)) {
    for (const m of text.matchAll(LINK_RE)) {
      const target = m[1] ?? '';
      if (/^[a-z]+:/i.test(target)) continue; // http:, https:, mailto:
      refs.push({ kind: target.startsWith('#') ? 'anchor' : 'link', text: target, line });
    }
  }
  for (const { text, line } of codeOf(markdown)) {
    for (const m of text.matchAll(CODE_PATH_RE)) {
      const p = (m[1] ?? '').replace(/[.,;:]+$/, '');
      // A path cut at a placeholder (`bench/results/<name>.md`) or an ellipsis names a family of
      // files, not one: what comes before the placeholder is checked as a folder.
      const after = text.slice((m.index ?? 0) + (m[1] ?? '').length);
      if (after.startsWith('<') || after.startsWith('…')) {
        const folder = p.slice(0, p.lastIndexOf('/') + 1);
        if (folder) refs.push({ kind: 'path', text: folder, line });
        continue;
      }
      refs.push({ kind: 'path', text: p, line });
    }
    for (const m of text.matchAll(TARCIL_RE)) refs.push({ kind: 'command', text: (m[1] ?? '').trim(), line });
    for (const m of text.matchAll(NPM_RE)) refs.push({ kind: 'script', text: m[2] ?? m[1] ?? '', line });
  }
  return refs;
}

/** GitHub's anchor of a heading: lower case, punctuation dropped, spaces to '-'. */
export function slug(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/`/g, '')
    .replace(/[^\p{L}\p{N} _-]/gu, '')
    .replace(/ /g, '-');
}

/** The anchors of a Markdown file's headings (outside fenced blocks), with GitHub's -1, -2 suffixes. */
export function anchorsOf(markdown: string): Set<string> {
  const out = new Set<string>();
  const seen = new Map<string, number>();
  for (const { text } of proseLines(markdown)) {
    const h = /^#{1,6} +(.*)$/.exec(text);
    if (!h) continue;
    const s = slug(h[1] ?? '');
    const n = seen.get(s) ?? 0;
    seen.set(s, n + 1);
    out.add(n === 0 ? s : `${s}-${n}`);
  }
  return out;
}

/** Whether a path, possibly with `*` in its last part, names something that exists. */
function exists(path: string): boolean {
  if (!path.includes('*')) return existsSync(path);
  const dir = dirname(path);
  const re = new RegExp(
    `^${path
      .slice(dir.length + 1)
      .replace(/[.+^${}()|[\]\\]/g, '\\$&')
      .replace(/\*/g, '.*')}$`,
  );
  return existsSync(dir) && statSync(dir).isDirectory() && readdirSync(dir).some((f) => re.test(f));
}

export interface CliCommands {
  /** Top-level command → its subcommands (empty when it has none). */
  commands: Map<string, Set<string>>;
}

export interface Problem {
  file: string;
  line: number;
  what: string;
}

/**
 * Checks every reference of the document at `file` (absolute): a path must exist from the
 * repository's root or from the document's folder; a link from the document's folder, and its
 * anchor among the target's headings; a command must be one of the CLI's (and its second word
 * one of that command's subcommands, when it has any); a script one of package.json's.
 */
export function check(file: string, root: string, cli: CliCommands, scripts: Set<string>): Problem[] {
  const text = readFileSync(file, 'utf8');
  const here = dirname(file);
  const rel = relative(root, file);
  const problems: Problem[] = [];
  const anchorsCache = new Map<string, Set<string>>();
  const anchors = (f: string): Set<string> => {
    let a = anchorsCache.get(f);
    if (!a) anchorsCache.set(f, (a = anchorsOf(readFileSync(f, 'utf8'))));
    return a;
  };
  for (const r of refsOf(text)) {
    const bad = (what: string): void => void problems.push({ file: rel, line: r.line, what });
    switch (r.kind) {
      case 'path':
        if (!exists(join(root, r.text)) && !exists(join(here, r.text))) bad(`no file or folder ${r.text}`);
        break;
      case 'link': {
        const [target = '', anchor] = r.text.split('#');
        const path = resolve(here, decodeURI(target));
        if (!existsSync(path)) bad(`link to a missing file: ${r.text}`);
        else if (anchor !== undefined && path.endsWith('.md') && !anchors(path).has(anchor)) bad(`link to a missing heading: ${r.text}`);
        break;
      }
      case 'anchor':
        if (!anchors(file).has(r.text.slice(1))) bad(`link to a missing heading: ${r.text}`);
        break;
      case 'command': {
        const [first = '', second] = r.text.split(/ +/);
        for (const cmd of first.split(/\\?\|/)) {
          const subs = cli.commands.get(cmd);
          if (!subs) {
            bad(`tarcil has no command ${cmd} (in \`tarcil ${r.text}\`)`);
            continue;
          }
          if (subs.size > 0 && second !== undefined) {
            for (const sub of second.split(/\\?\|/)) if (!subs.has(sub)) bad(`tarcil ${cmd} has no command ${sub}`);
          }
        }
        break;
      }
      case 'script':
        if (!scripts.has(r.text)) bad(`package.json has no script ${r.text}`);
        break;
    }
  }
  return problems;
}

/** The commands a help text lists under its headings (`  name [options] <arg>   description`). */
export function commandsInHelp(help: string): string[] {
  const out: string[] = [];
  let inOptions = false;
  for (const l of help.split('\n')) {
    if (/^\S.*:$/.test(l)) inOptions = l === 'Options:';
    const m = /^ {2}([a-z][\w-]*)(?= |$)/.exec(l);
    if (m && !inOptions) out.push(m[1] ?? '');
  }
  return out;
}
