/**
 * deploy/: the Dockerfile and the systemd units, parsed and checked without a Docker engine or
 * systemd: the Dockerfile's stages, the non-root user, the entry point naming the package's bin,
 * the build context its COPY lines need; the units' sections and keys, and their ExecStart
 * command lines, which the real `tarcil` accepts (it gets as far as the store).
 */
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { EXIT } from '../../src/cli/exit-codes.ts';
import { freePort } from '../support/etcd.ts';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const BIN = join(ROOT, 'src', 'cli', 'bin.js');
const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { bin: Record<string, string> };
const BIN_NAME = Object.keys(pkg.bin)[0] ?? '';

interface Instruction {
  line: number;
  keyword: string;
  args: string;
}

/** A Dockerfile's instructions: comments and blank lines dropped, `\` continuations joined. */
export function parseDockerfile(text: string): Instruction[] {
  const out: Instruction[] = [];
  let pending: { line: number; text: string } | undefined;
  text.split('\n').forEach((raw, i) => {
    const line = raw.trimEnd();
    if (pending === undefined && (line.trim() === '' || line.trimStart().startsWith('#'))) return;
    if (pending !== undefined && line.trimStart().startsWith('#')) return; // a comment inside a continuation
    const cont = line.endsWith('\\');
    const body = cont ? line.slice(0, -1) : line;
    pending = pending ? { line: pending.line, text: `${pending.text} ${body.trim()}` } : { line: i + 1, text: body.trim() };
    if (cont) return;
    const m = /^(\S+)\s*(.*)$/.exec(pending.text);
    out.push({ line: pending.line, keyword: (m?.[1] ?? '').toUpperCase(), args: m?.[2] ?? '' });
    pending = undefined;
  });
  if (pending) throw new Error(`line ${pending.line}: a continuation runs past the end`);
  return out;
}

const KEYWORDS = new Set([
  'FROM',
  'RUN',
  'CMD',
  'LABEL',
  'EXPOSE',
  'ENV',
  'ADD',
  'COPY',
  'ENTRYPOINT',
  'VOLUME',
  'USER',
  'WORKDIR',
  'ARG',
  'ONBUILD',
  'STOPSIGNAL',
  'HEALTHCHECK',
  'SHELL',
]);

/** A systemd unit: section → key → values (a key may repeat). */
export function parseUnit(text: string): Map<string, Map<string, string[]>> {
  const sections = new Map<string, Map<string, string[]>>();
  let current: Map<string, string[]> | undefined;
  let pending = '';
  text.split('\n').forEach((raw, i) => {
    const line = (pending + raw.trim()).trim();
    pending = '';
    if (line === '' || line.startsWith('#') || line.startsWith(';')) return;
    if (line.endsWith('\\')) {
      pending = `${line.slice(0, -1)} `;
      return;
    }
    const sec = /^\[([A-Za-z]+)\]$/.exec(line);
    if (sec) {
      if (sections.has(sec[1] ?? '')) throw new Error(`line ${i + 1}: section [${sec[1]}] twice`);
      current = new Map();
      sections.set(sec[1] ?? '', current);
      return;
    }
    const kv = /^([A-Za-z][A-Za-z0-9]*)=(.*)$/.exec(line);
    if (!kv) throw new Error(`line ${i + 1}: not key=value: ${line}`);
    if (!current) throw new Error(`line ${i + 1}: ${kv[1]} before any section`);
    const key = kv[1] ?? '';
    current.set(key, [...(current.get(key) ?? []), kv[2] ?? '']);
  });
  return sections;
}

/** The keys the units may use, per section (systemd.unit(5), systemd.service(5), systemd.exec(5), systemd.kill(5)). */
const UNIT_KEYS: Record<string, Set<string>> = {
  Unit: new Set(['Description', 'Documentation', 'Wants', 'Requires', 'After', 'Before', 'PartOf', 'StartLimitIntervalSec', 'StartLimitBurst']),
  Service: new Set([
    'Type',
    'User',
    'Group',
    'Environment',
    'EnvironmentFile',
    'ExecStart',
    'ExecStartPre',
    'ExecReload',
    'Restart',
    'RestartSec',
    'RestartPreventExitStatus',
    'KillMode',
    'KillSignal',
    'TimeoutStopSec',
    'TimeoutStartSec',
    'NoNewPrivileges',
    'ProtectSystem',
    'ProtectHome',
    'PrivateTmp',
    'LimitNOFILE',
    'LogsDirectory',
    'StateDirectory',
    'WorkingDirectory',
    'ReadWritePaths',
  ]),
  Install: new Set(['WantedBy', 'RequiredBy', 'Alias']),
};
const BOOLEANS = new Set(['NoNewPrivileges', 'ProtectHome', 'PrivateTmp']);

describe('deploy/Dockerfile', () => {
  const text = readFileSync(join(ROOT, 'deploy', 'Dockerfile'), 'utf8');
  const ins = parseDockerfile(text);

  it('has only known instructions, and named stages: a build stage and the image that copies from it', () => {
    for (const i of ins) expect(KEYWORDS.has(i.keyword), `line ${i.line}: ${i.keyword}`).toBe(true);
    const froms = ins.filter((i) => i.keyword === 'FROM');
    expect(froms.length).toBeGreaterThanOrEqual(2);
    const stages = froms.map((f) => /^(\S+)\s+AS\s+(\S+)$/i.exec(f.args)?.[2]);
    expect(
      stages.every((s) => s !== undefined),
      'every stage is named',
    ).toBe(true);
    expect(new Set(stages).size).toBe(stages.length);
    // The last stage copies only from an earlier stage, not the build context.
    const last = ins.slice(ins.lastIndexOf(froms.at(-1) as Instruction));
    const copies = last.filter((i) => i.keyword === 'COPY');
    expect(copies.length).toBeGreaterThan(0);
    for (const c of copies) {
      const from = /--from=(\S+)/.exec(c.args)?.[1];
      expect(from, `line ${c.line}`).toBeDefined();
      expect(stages.slice(0, -1)).toContain(from);
    }
  });

  it('runs as a non-root user, with the package’s bin as its entry point', () => {
    const last = ins.slice(ins.lastIndexOf(ins.filter((i) => i.keyword === 'FROM').at(-1) as Instruction));
    const users = last.filter((i) => i.keyword === 'USER');
    expect(users.length).toBeGreaterThan(0);
    const user = users.at(-1)?.args.split(':')[0] ?? '';
    expect(['', 'root', '0']).not.toContain(user);
    // The user is created in the image (by name or uid).
    expect(last.some((i) => i.keyword === 'RUN' && new RegExp(`useradd\\b.*(--uid ${user}\\b|\\b${user}$)`).test(i.args))).toBe(true);
    const entry = last.filter((i) => i.keyword === 'ENTRYPOINT').at(-1);
    const argv = JSON.parse(entry?.args ?? 'null') as string[] | null; // exec form: a JSON array
    expect(argv?.[0]).toBe(BIN_NAME);
    const cmd = JSON.parse(last.filter((i) => i.keyword === 'CMD').at(-1)?.args ?? '[]') as string[];
    expect(cmd[0]).toBe('up');
  });

  it('finds in the build context everything its COPY lines name, and its .dockerignore lets them through', () => {
    const ignore = readFileSync(join(ROOT, 'deploy', 'Dockerfile.dockerignore'), 'utf8');
    for (const c of ins.filter((i) => i.keyword === 'COPY' && !i.args.includes('--from='))) {
      const parts = c.args.split(/\s+/).filter((p) => !p.startsWith('--'));
      for (const src of parts.slice(0, -1)) {
        expect(existsSync(join(ROOT, src)), `line ${c.line}: ${src}`).toBe(true);
        expect(ignore, src).toMatch(new RegExp(`^!${src.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}(/\\*\\*)?$`, 'm'));
      }
    }
  });
});

describe('deploy/systemd', () => {
  const units = ['tarcil-server.service', 'tarcil-monitor.service'];
  const env = new Map(
    readFileSync(join(ROOT, 'deploy', 'systemd', 'tarcil.env'), 'utf8')
      .split('\n')
      .filter((l) => l.trim() !== '' && !l.startsWith('#'))
      .map((l) => {
        const m = /^([A-Z_][A-Z0-9_]*)=(.*)$/.exec(l);
        if (!m) throw new Error(`tarcil.env: not NAME=value: ${l}`);
        return [m[1] ?? '', m[2] ?? ''] as const;
      }),
  );

  it.each(units)('%s has [Unit], [Service] and [Install] with known keys and valid values', (name) => {
    const unit = parseUnit(readFileSync(join(ROOT, 'deploy', 'systemd', name), 'utf8'));
    expect([...unit.keys()]).toEqual(['Unit', 'Service', 'Install']);
    for (const [section, keys] of unit) {
      for (const [key, values] of keys) {
        expect(UNIT_KEYS[section]?.has(key), `[${section}] ${key}`).toBe(true);
        if (BOOLEANS.has(key)) expect(values, key).toEqual(['yes']);
      }
    }
    const service = unit.get('Service') as Map<string, string[]>;
    expect(service.get('Type')).toEqual(['simple']);
    expect(service.get('User')).toEqual(['tarcil']);
    expect(service.get('Restart')).toEqual(['on-failure']);
    // Exit code 2 (usage) is not worth a restart.
    expect(service.get('RestartPreventExitStatus')).toEqual([String(EXIT.USAGE)]);
    expect(service.get('EnvironmentFile')).toEqual(['/etc/tarcil/tarcil.env']);
    expect(unit.get('Install')?.get('WantedBy')).toEqual(['multi-user.target']);
    const exec = service.get('ExecStart')?.[0] ?? '';
    const [program] = exec.split(/\s+/);
    expect(program?.startsWith('/')).toBe(true);
    expect(basename(program ?? '')).toBe(BIN_NAME);
  });

  it('tarcil.env sets only variables the commands take, as --help shows them', () => {
    expect(env.size).toBeGreaterThan(0);
    const help = spawnSync(process.execPath, [BIN, 'server', '--help'], { encoding: 'utf8' }).stdout;
    for (const k of env.keys()) expect(help, k).toContain(`env: ${k}`);
  });

  it.each(units)('%s: tarcil accepts its ExecStart command line (it gets as far as the store)', async (name) => {
    const unit = parseUnit(readFileSync(join(ROOT, 'deploy', 'systemd', name), 'utf8'));
    const argv = (unit.get('Service')?.get('ExecStart')?.[0] ?? '')
      .split(/\s+/)
      .slice(1)
      .map((a) => a.replace(/%H/g, 'node1'));
    // The store from tarcil.env, pointed at a port where nothing listens; a wait of 1 s instead of
    // the unit's unbounded one (the last --wait-for-store wins).
    const port = await freePort();
    const r = spawnSync(process.execPath, [BIN, ...argv, '--wait-for-store', '1s', '--port', '0', '--metrics-port', '0'], {
      encoding: 'utf8',
      env: { ...process.env, ...Object.fromEntries(env), TARCIL_STORE: `etcd://127.0.0.1:${port}`, TARCIL_LOG: 'silent' },
    });
    expect(r.stderr).toContain(`cannot start: cannot reach etcd at http://127.0.0.1:${port}`);
    expect(r.status).toBe(EXIT.UNAVAILABLE);
  });
});
