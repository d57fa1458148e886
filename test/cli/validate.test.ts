/**
 * `tarcil validate`, the published JSON Schema of a job spec, and colour: a valid spec is OK
 * (exit 0), an invalid one names each field and rule (exit 2); schema/jobspec.schema.json is what
 * the zod schema generates now (it cannot go stale); the examples in profiles/jobs pass both;
 * colour is allowed only on a terminal without NO_COLOR, and a table in a pipe has no escape.
 */
import { spawnSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { colorEnabled, tableStyle } from '../../src/cli/color.ts';
import { EXIT } from '../../src/cli/exit-codes.ts';
import { JOBSPEC_SCHEMA_PATH, jobSpecJsonSchemaText } from '../../src/model/jobspec-json-schema.ts';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const BIN = join(ROOT, 'src', 'cli', 'bin.js');
const ANSI = /\x1b\[/; // eslint-disable-line no-control-regex

function tarcil(args: string[], opts: { stdin?: string; env?: Record<string, string> } = {}): { code: number | null; out: string; err: string } {
  const r = spawnSync(process.execPath, [BIN, ...args], {
    encoding: 'utf8',
    input: opts.stdin ?? '',
    env: { ...process.env, TARCIL_LOG: 'silent', ...opts.env },
  });
  return { code: r.status, out: r.stdout, err: r.stderr };
}

describe('tarcil validate', () => {
  it('a valid spec is OK with exit code 0, from a file or stdin', () => {
    const file = join(ROOT, 'profiles', 'jobs', 'spark-lr.json');
    const r = tarcil(['validate', file]);
    expect(r.err).toBe('');
    expect(r.code).toBe(EXIT.OK);
    expect(r.out).toMatch(/^OK: .*spark-lr\.json is a valid job spec/);
    const stdin = tarcil(['validate', '-'], { stdin: readFileSync(file, 'utf8') });
    expect(stdin.code).toBe(EXIT.OK);
    expect(stdin.out).toMatch(/^OK: <stdin>/);
  });

  it('an invalid spec exits 2, naming each field and the rule it breaks', () => {
    const r = tarcil(['validate', '-'], { stdin: JSON.stringify({ name: 'bad name', profile: 'no-such-profile', tasks: 0, durationMs: 10, colour: 'red' }) });
    expect(r.code).toBe(EXIT.USAGE);
    expect(r.out).toBe('');
    expect(r.err).toContain("<stdin>: name: must be 1-128 characters of A-Z, a-z, 0-9, '.', '_' and '-'");
    expect(r.err).toContain('<stdin>: tasks: must be an integer in [1, 100000]');
    expect(r.err).toContain('<stdin>: colour: is not a known field');
    expect(r.err).toContain("<stdin>: profile: unknown workload profile 'no-such-profile'");
    // --no-catalog: the schema alone, names not looked up.
    const schemaOnly = tarcil(['validate', '-', '--no-catalog'], {
      stdin: JSON.stringify({ name: 'x', profile: 'no-such-profile', tasks: 1, durationMs: 10 }),
    });
    expect(schemaOnly.code).toBe(EXIT.OK);
    const json = tarcil(['validate', '-', '--json'], { stdin: JSON.stringify({ name: 'x', profile: 'spark-lr', tasks: 1.5, durationMs: 10 }) });
    expect(json.code).toBe(EXIT.USAGE);
    expect(JSON.parse(json.out)).toEqual({ file: '<stdin>', valid: false, issues: [{ field: 'tasks', rule: 'must be an integer in [1, 100000]' }] });
  });

  it('text that is not JSON, or a file that cannot be read, exits 2', () => {
    const r = tarcil(['validate', '-'], { stdin: '{ "name": ' });
    expect(r.code).toBe(EXIT.USAGE);
    expect(r.err).toMatch(/^<stdin>: \(root\): is not JSON/);
    const missing = tarcil(['validate', '/no/such/spec.json']);
    expect(missing.code).toBe(EXIT.USAGE);
    expect(missing.err).toContain("cannot read '/no/such/spec.json' (ENOENT)");
  });

  it('an empty file or stdin is refused as empty, by validate and by submit before it connects', () => {
    const empty = tarcil(['validate', '/dev/null']);
    expect(empty.code).toBe(EXIT.USAGE);
    expect(empty.err).toContain("'/dev/null' is empty: a job spec is a JSON object");
    const stdin = tarcil(['validate', '-'], { stdin: ' \n' });
    expect(stdin.code).toBe(EXIT.USAGE);
    expect(stdin.err).toContain('stdin is empty');
    // Port 1: nothing listens; the refusal comes first, naming the file rather than the request's fields.
    const submit = tarcil(['submit', '/dev/null', '--server', '127.0.0.1:1']);
    expect(submit.code).toBe(EXIT.USAGE);
    expect(submit.err).toContain("'/dev/null' is empty");
  });
});

describe('the JSON Schema of a job spec', () => {
  it(`${JOBSPEC_SCHEMA_PATH} is what the zod schema generates (npm run schema:gen)`, () => {
    expect(readFileSync(join(ROOT, JOBSPEC_SCHEMA_PATH), 'utf8')).toBe(jobSpecJsonSchemaText());
  });

  it('describes the fields of the example specs, and requires a duration or a command', () => {
    const schema = JSON.parse(jobSpecJsonSchemaText()) as {
      properties: Record<string, unknown>;
      required: string[];
      additionalProperties: boolean;
      anyOf: unknown[];
    };
    expect(schema.required).toEqual(['name', 'profile', 'tasks']);
    expect(schema.additionalProperties).toBe(false);
    expect(schema.anyOf).toEqual([{ required: ['durationMs'] }, { required: ['command'] }]);
    for (const f of readdirSync(join(ROOT, 'profiles', 'jobs')).filter((x) => x.endsWith('.json'))) {
      const example = JSON.parse(readFileSync(join(ROOT, 'profiles', 'jobs', f), 'utf8')) as Record<string, unknown>;
      for (const k of Object.keys(example)) expect(schema.properties, `${f}: ${k}`).toHaveProperty(k);
    }
  });
});

describe('colour', () => {
  it('only on a terminal, never with NO_COLOR or TERM=dumb', () => {
    expect(colorEnabled({ isTTY: true }, {})).toBe(true);
    expect(colorEnabled({ isTTY: false }, {})).toBe(false);
    expect(colorEnabled({}, {})).toBe(false);
    expect(colorEnabled({ isTTY: true }, { NO_COLOR: '1' })).toBe(false);
    expect(colorEnabled({ isTTY: true }, { NO_COLOR: '' })).toBe(true); // no-color.org: set and not empty
    expect(colorEnabled({ isTTY: true }, { TERM: 'dumb' })).toBe(false);
    expect(tableStyle({ isTTY: false })).toEqual({ head: [], border: [] });
  });

  it('a table written to a pipe carries no ANSI escape, with or without NO_COLOR and --no-color', () => {
    for (const extra of [[], ['--no-color']]) {
      for (const env of [{}, { NO_COLOR: '1' }, { FORCE_COLOR: '1' }] as Record<string, string>[]) {
        const r = tarcil(['profile', 'spark-lr', '--cluster', 'demo', ...extra], { env });
        expect(r.code).toBe(EXIT.OK);
        expect(r.out).toMatch(/bucket/);
        expect(r.out).not.toMatch(ANSI);
      }
    }
  });
});
