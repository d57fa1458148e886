/**
 * The flags of the connection and stream limits of `tarcil server` and `up`: a bad value is
 * refused before anything starts, naming the flag and the rule (exit code 2); good values reach
 * the limits the front-end is started with; the options module refuses the same values.
 */
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { Command } from 'commander';
import { describe, expect, it } from 'vitest';
import { streamLimitOptions, streamLimitsOf } from '../../src/cli/flags.ts';
import { checkSchedulerOptions, STREAM_LIMIT_DEFAULTS } from '../../src/frontend/options.ts';
import { TarcilError } from '../../src/util/errors.ts';

const BIN = fileURLToPath(new URL('../../src/cli/bin.js', import.meta.url));

function tarcil(...args: string[]): { code: number; err: string } {
  const r = spawnSync(process.execPath, [BIN, ...args], { encoding: 'utf8', env: { ...process.env, TARCIL_LOG: 'silent' }, timeout: 60_000 });
  return { code: r.status ?? -1, err: r.stderr };
}

function parse(args: string[]): ReturnType<typeof streamLimitsOf> {
  const c = streamLimitOptions(new Command('server').exitOverride().configureOutput({ writeErr: () => undefined }));
  c.parse(args, { from: 'user' });
  return streamLimitsOf(c.opts());
}

describe('stream limit flags', () => {
  it('refuse a bad value on server and up, naming the flag and the rule, exit code 2', () => {
    for (const [cmd, flag, value, rule] of [
      ['server', '--max-watches-per-job', '0', 'must be an integer in [1, 1000000]'],
      ['up', '--calls-per-turn', '-1', 'must be an integer in [0, 1000000]'],
      ['server', '--watch-buffer', '12 bytes', 'must be a size such as 256KiB, 64MiB or 1GiB'],
      ['up', '--slow-reader-timeout', '0', 'must be a duration such as 1500ms, 90s, 30m or 1h (a bare number is seconds), at least 1s, at most 1h'],
      ['server', '--max-streams-per-connection', '2.5', 'must be an integer in [1, 1000000]'],
    ] as const) {
      const r = tarcil(cmd, flag, value);
      expect(r.code, `${cmd} ${flag} ${value}`).toBe(2);
      expect(r.err).toContain(`${flag} ${rule}`);
      expect(r.err).toContain(`(got '${value}')`);
    }
  });

  it('parse sizes, durations and counts into the limits, the others left at their defaults', () => {
    const l = parse([
      '--calls-per-turn',
      '7',
      '--watch-buffer',
      '1MiB',
      '--watch-total-buffer',
      '2G',
      '--slow-reader-timeout',
      '5s',
      '--request-timeout',
      'off',
      '--max-watches-per-connection',
      '10000',
    ]);
    expect(l).toEqual({
      ...STREAM_LIMIT_DEFAULTS,
      callsPerTurn: 7,
      streamQueueBytes: 2 ** 20,
      totalQueueBytes: 2 * 2 ** 30,
      slowConsumerMs: 5000,
      requestTimeoutMs: 0,
      maxWatchesPerConnection: 10_000,
    });
    expect(parse([])).toEqual(STREAM_LIMIT_DEFAULTS);
    expect(() => parse(['--watch-max-behind', '1KiB'])).toThrow(/--watch-max-behind must be a size .*from 64KiB to 16GiB \(got '1KiB'\)/);
    expect(() => parse(['--keepalive-time', 'off'])).toThrow(/--keepalive-time must be a duration/);
  });

  it('are checked again where the front-end starts, naming the option', () => {
    const refusal = (streamLimits: object): TarcilError => {
      try {
        checkSchedulerOptions({ agents: 1, port: 0, streamLimits });
      } catch (e) {
        return e as TarcilError;
      }
      throw new Error('not refused');
    };
    expect(refusal({ maxWatchesPerJob: 0 })).toMatchObject({ code: 'INVALID_ARGUMENT', field: 'maxWatchesPerJob' });
    expect(refusal({ callsPerTurn: 0.5 }).message).toContain('must be an integer in [0, 1000000]');
    expect(refusal({ streamQueueBytes: 2 ** 20, totalQueueBytes: 2 ** 20 - 1 })).toMatchObject({ field: 'totalQueueBytes' });
    expect(() => checkSchedulerOptions({ agents: 1, port: 0, streamLimits: { requestTimeoutMs: 0, unsentTimeoutMs: 0 } })).not.toThrow();
  });
});
