import { Writable } from 'node:stream';
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { boundedLogOptions, LOG_VALUE_CHARS, logFormat, logLevel, withBindings } from '../../src/util/log.ts';
import { duplicateKeys } from '../support/json-keys.ts';

/** A pino logger writing into an array of lines. */
function captured(): { log: pino.Logger; lines: string[] } {
  const lines: string[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, cb) {
      lines.push(...chunk.toString().split('\n').filter(Boolean));
      cb();
    },
  });
  return { log: pino({ level: 'debug' }, sink), lines };
}

const saved = { log: process.env.TARCIL_LOG, format: process.env.TARCIL_LOG_FORMAT };
afterEach(() => {
  for (const [k, v] of [
    ['TARCIL_LOG', saved.log],
    ['TARCIL_LOG_FORMAT', saved.format],
  ] as const) {
    if (v === undefined) delete process.env[k];
    else process.env[k] = v;
  }
});

describe('duplicateKeys (the test check)', () => {
  it('finds a key written twice, at any depth, and nothing in a clean line', () => {
    expect(duplicateKeys('{"server":"s0","server":"s0","n":1}')).toEqual(['$.server']);
    expect(duplicateKeys('{"a":{"b":1,"b":[{"c":1,"c":2}]}}')).toEqual(['$.a.b', '$.a.b[0].c']);
    expect(duplicateKeys('{"a":"x\\"y","b":[1,2,{"a":null}],"c":-1.5e3,"d":true}')).toEqual([]);
  });
});

describe('withBindings', () => {
  it('returns the logger itself when it binds the keys already, so nothing is written twice', () => {
    const { log, lines } = captured();
    const monitor = log.child({ component: 'monitor', server: 's1' });
    const node = withBindings(monitor, { server: 's1' });
    expect(node).toBe(monitor);
    node.info({ task: 3 }, 'started');
    expect(duplicateKeys(lines[0]!)).toEqual([]);
    expect(JSON.parse(lines[0]!)).toMatchObject({ component: 'monitor', server: 's1', task: 3 });
  });

  it('binds what the parent does not (a hollow process logger names no server)', () => {
    const { log, lines } = captured();
    const hollow = log.child({ component: 'hollow' });
    const node = withBindings(hollow, { server: 'h7' });
    expect(node).not.toBe(hollow);
    node.warn('registration failed');
    expect(duplicateKeys(lines[0]!)).toEqual([]);
    expect(JSON.parse(lines[0]!)).toMatchObject({ component: 'hollow', server: 'h7' });
  });
});

describe('TARCIL_LOG and TARCIL_LOG_FORMAT', () => {
  it('TARCIL_LOG sets the level over the command default; anything else is refused by name', () => {
    process.env.TARCIL_LOG = 'debug';
    expect(logLevel('warn')).toBe('debug');
    process.env.TARCIL_LOG = 'WARN';
    expect(logLevel()).toBe('warn');
    process.env.TARCIL_LOG = 'verbose';
    expect(() => logLevel()).toThrow(/^TARCIL_LOG: "verbose" is no log level \(one of trace, debug, info, warn, error, fatal, silent\)/);
    delete process.env.TARCIL_LOG;
    expect(logLevel('warn')).toBe('silent'); // under vitest without TARCIL_LOG
  });

  it('TARCIL_LOG_FORMAT picks json or pretty; without it, JSON when stderr is no terminal', () => {
    process.env.TARCIL_LOG_FORMAT = 'pretty';
    expect(logFormat()).toBe('pretty');
    process.env.TARCIL_LOG_FORMAT = 'json';
    expect(logFormat()).toBe('json');
    process.env.TARCIL_LOG_FORMAT = 'xml';
    expect(() => logFormat()).toThrow(/^TARCIL_LOG_FORMAT: "xml" is no log format \(one of json, pretty\)/);
    delete process.env.TARCIL_LOG_FORMAT;
    expect(logFormat()).toBe(process.stderr.isTTY ? 'pretty' : 'json');
  });
});

describe('bounded log lines', () => {
  it('cuts a huge message and a huge field, saying their length, and leaves short ones whole', () => {
    const lines: string[] = [];
    const sink = new Writable({
      write(chunk: Buffer, _enc, cb) {
        lines.push(...chunk.toString().split('\n').filter(Boolean));
        cb();
      },
    });
    const log = pino({ level: 'info', ...boundedLogOptions }, sink);
    const huge = 'n'.repeat(20_000);
    log.warn({ err: `unknown workload profile '${huge}'`, job: 'j-1' }, `refused ${huge}`);
    const rec = JSON.parse(lines[0] ?? '{}') as { err: string; msg: string; job: string };
    expect(rec.job).toBe('j-1');
    expect(rec.err.length).toBeLessThan(LOG_VALUE_CHARS + 40);
    expect(rec.err.endsWith(`… (${`unknown workload profile '${huge}'`.length} characters)`)).toBe(true);
    expect(rec.msg.length).toBeLessThan(LOG_VALUE_CHARS + 40);
    expect(rec.msg.endsWith(`… (${`refused ${huge}`.length} characters)`)).toBe(true);
  });
});
