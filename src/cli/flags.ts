/**
 * The parsers of the command line's flag values (numbers, integers in a range, shares, durations,
 * repeatable flags), one of each for every command. A bad value is refused with the flag and the
 * rule (exit code 2). Ranges and defaults come from the components' options modules.
 */
import { type Command, InvalidArgumentError, Option } from 'commander';
import { STREAM_LIMIT_DEFAULTS, STREAM_LIMIT_RANGES, type StreamLimits } from '../frontend/options.ts';

/** A number that passes `rule`, refused with `ruleText` otherwise. */
export function num(name: string, rule: (x: number) => boolean, ruleText: string): (value: string) => number {
  return (value: string): number => {
    const x = Number(value);
    if (value.trim() === '' || !Number.isFinite(x) || !rule(x)) {
      throw new InvalidArgumentError(`${name} ${ruleText} (got '${value}')`);
    }
    return x;
  };
}

/** An integer in [min, max]. */
export const int = (name: string, min: number, max: number): ((value: string) => number) =>
  num(name, (x) => Number.isInteger(x) && x >= min && x <= max, `must be an integer in [${min}, ${max}]`);

/** An integer in an options module's range. */
export const intIn = (name: string, r: { readonly min: number; readonly max: number }): ((value: string) => number) => int(name, r.min, r.max);

/** Seeds of the command line's random choices. */
export const SEED_RANGE = { min: 0, max: 2 ** 31 - 1 } as const;

/** A number in (0, 1). */
export const unit = (name: string): ((value: string) => number) => num(name, (x) => x > 0 && x < 1, 'must be in (0, 1)');

/** A number in (0, 1]. */
export const fraction = (name: string): ((value: string) => number) => num(name, (x) => x > 0 && x <= 1, 'must be a number in (0, 1]');

/** Collects a repeatable flag's values. */
export const collect = (v: string, prev: string[] = []): string[] => [...prev, v];

const UNIT_MS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, min: 60_000, h: 3_600_000 };

/** A duration as the flags write it: `1h`, `5m`, `60s`, `1500ms`. */
export const fmtMs = (ms: number): string =>
  ms % 3_600_000 === 0 && ms > 0 ? `${ms / 3_600_000}h` : ms % 60_000 === 0 && ms > 0 ? `${ms / 60_000}m` : ms % 1000 === 0 ? `${ms / 1000}s` : `${ms}ms`;

/**
 * A duration in milliseconds from `1500ms`, `90s`, `30m`, `1h` or a bare number of seconds, within
 * [min, max]; with `off`, the words off and 0 give 0.
 */
export const duration =
  (name: string, r: { readonly min?: number; readonly max: number }, opts: { off?: boolean } = {}) =>
  (v: string): number => {
    if (opts.off && /^\s*(off|0)\s*$/i.test(v)) return 0;
    const m = /^\s*(\d+(?:\.\d+)?)\s*(ms|s|min|m|h)?\s*$/.exec(v);
    const ms = m ? Math.round(Number(m[1]) * (UNIT_MS[m[2] ?? 's'] ?? NaN)) : NaN;
    const min = r.min ?? 0;
    if (!Number.isFinite(ms) || ms > r.max || ms < min) {
      const range = `${min > 0 ? `at least ${fmtMs(min)}, ` : ''}at most ${fmtMs(r.max)}${opts.off ? ', or off' : ''}`;
      throw new InvalidArgumentError(`${name} must be a duration such as 1500ms, 90s, 30m or 1h (a bare number is seconds), ${range} (got '${v}')`);
    }
    return ms;
  };

/**
 * A front-end address (`--server`, $TARCIL_SERVER): `host`, `host:port`, `[v6]` or `[v6]:port`,
 * the port defaulting to the front-end's (gRPC would dial 443 for an address without one); a
 * gRPC target with a scheme (`dns:///h:7070`, `unix:/run/tarcil.sock`) is taken as it is.
 */
export const frontEndAddress =
  (name: string, defaultPort: number) =>
  (v: string): string => {
    const s = v.trim();
    if (/^(dns|unix|unix-abstract|ipv4|ipv6):/.test(s)) return s;
    const m = /^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._-]+)(?::(\d{1,5}))?$/.exec(s);
    const port = m?.[2] === undefined ? defaultPort : Number(m[2]);
    if (!m || port < 1 || port > 65535) {
      throw new InvalidArgumentError(`${name} must be host[:port], the port in [1, 65535] and ${defaultPort} if left out (got '${v}')`);
    }
    return `${m[1] ?? ''}:${port}`;
  };

/** pino's levels, as `--log-level` and $TARCIL_LOG take them. */
export const LOG_LEVEL_NAMES = ['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'];

/** The pause between two tries of a daemon's `--wait-for-store`. */
export const STORE_RETRY_MS = 2000;

/**
 * `tarcil submit --deadline`: how long a submission is tried again (with its request id) while
 * the front-end is not reached, unavailable, slow or busy. Its longest value is the time a
 * front-end keeps a request id at least (REQUEST_RETAIN_FLOOR_MS), so that no retry comes after
 * the id that makes it single is forgotten.
 */
export const SUBMIT_DEADLINE_MS = 60_000;

const UNIT_BYTES: Record<string, number> = { '': 1, b: 1, k: 1024, kib: 1024, m: 2 ** 20, mib: 2 ** 20, g: 2 ** 30, gib: 2 ** 30 };

/** A size as the flags write it: `256KiB`, `64MiB`, `1GiB`, or bytes. */
export const fmtBytes = (n: number): string =>
  n % 2 ** 30 === 0 && n > 0 ? `${n / 2 ** 30}GiB` : n % 2 ** 20 === 0 && n > 0 ? `${n / 2 ** 20}MiB` : n % 1024 === 0 && n > 0 ? `${n / 1024}KiB` : `${n}`;

/** A size in bytes from `262144`, `256KiB` (or `256K`), `64MiB` (`64M`), `1GiB` (`1G`), within [min, max]. */
export const bytes =
  (name: string, r: { readonly min: number; readonly max: number }) =>
  (v: string): number => {
    const m = /^\s*(\d+(?:\.\d+)?)\s*([a-z]*)\s*$/i.exec(v);
    const unit = UNIT_BYTES[(m?.[2] ?? '').toLowerCase()];
    const n = m && unit !== undefined ? Math.round(Number(m[1]) * unit) : NaN;
    if (!Number.isFinite(n) || n < r.min || n > r.max) {
      throw new InvalidArgumentError(
        `${name} must be a size such as 256KiB, 64MiB or 1GiB (a bare number is bytes), from ${fmtBytes(r.min)} to ${fmtBytes(r.max)} (got '${v}')`,
      );
    }
    return n;
  };

/** The flags of the stream limits (STREAM_LIMIT_DEFAULTS), with how each is written and what it bounds. */
const STREAM_FLAGS: readonly (readonly [flag: string, key: keyof StreamLimits, kind: 'int' | 'duration' | 'bytes', help: string])[] = [
  [
    '--max-streams-per-connection <n>',
    'maxConcurrentStreams',
    'int',
    'calls one connection carries at once (HTTP/2 SETTINGS_MAX_CONCURRENT_STREAMS); a gRPC client queues the others; a connection starts at twice --calls-per-turn and is raised up to this as its calls are set up',
  ],
  [
    '--calls-per-turn <n>',
    'callsPerTurn',
    'int',
    'new calls set up per turn of the event loop, fewer while turns take more than 30 ms; the others wait, each connection in turn; a connection may send at most twice this many beyond those set up (0: every call in the turn it arrives, and no such limit)',
  ],
  ['--keepalive-time <duration>', 'keepaliveTimeMs', 'duration', 'every connection is pinged this often'],
  ['--keepalive-timeout <duration>', 'keepaliveTimeoutMs', 'duration', 'a connection whose ping is not answered within this is closed'],
  ['--max-connection-idle <duration>', 'maxConnectionIdleMs', 'duration', 'a connection with no call for this long is closed (GOAWAY)'],
  [
    '--request-timeout <duration>',
    'requestTimeoutMs',
    'duration',
    'a request not arrived whole this long after its headers is answered DEADLINE_EXCEEDED (off: never)',
  ],
  ['--unsent-timeout <duration>', 'unsentTimeoutMs', 'duration', 'a call whose complete answer its client has not taken this long after is reset (off: never)'],
  ['--max-watches <n>', 'maxWatches', 'int', 'WatchJob streams served at once; more get RESOURCE_EXHAUSTED'],
  ['--max-watches-per-job <n>', 'maxWatchesPerJob', 'int', 'WatchJob streams of one job served at once'],
  ['--max-watches-per-connection <n>', 'maxWatchesPerConnection', 'int', 'WatchJob streams one connection may have open at once'],
  ['--watch-buffer <size>', 'streamQueueBytes', 'bytes', 'bytes one WatchJob stream may hold unsent before it waits for its client'],
  ['--watch-total-buffer <size>', 'totalQueueBytes', 'bytes', 'bytes all WatchJob streams together may hold unsent'],
  ['--slow-reader-timeout <duration>', 'slowConsumerMs', 'duration', 'a WatchJob stream whose client takes nothing this long is dropped (RESOURCE_EXHAUSTED)'],
  ['--watch-max-behind <size>', 'maxBehindBytes', 'bytes', 'a WatchJob stream this many bytes behind its job starts over with a fresh snapshot'],
];

const attribute = (flag: string): string =>
  flag
    .slice(2)
    .split(' ')[0]!
    .replace(/-([a-z])/g, (_m, c: string) => c.toUpperCase());

/** Adds the stream-limit flags to `tarcil server` or `up`, under their own heading of the help. */
export function streamLimitOptions(c: Command): Command {
  for (const [flag, key, kind, help] of STREAM_FLAGS) {
    const name = flag.split(' ')[0]!;
    const r = STREAM_LIMIT_RANGES[key];
    const d = STREAM_LIMIT_DEFAULTS[key];
    const o = new Option(flag, help).helpGroup('Connection and stream limits:');
    if (kind === 'int') o.argParser(intIn(name, r)).default(d);
    else if (kind === 'bytes') o.argParser(bytes(name, r)).default(d, fmtBytes(d));
    else o.argParser(duration(name, r, { off: r.off === true })).default(d, fmtMs(d));
    c.addOption(o);
  }
  return c;
}

/** The stream limits from the parsed flags of streamLimitOptions (those not given are the defaults). */
export function streamLimitsOf(o: object): StreamLimits {
  const out: Partial<StreamLimits> = {};
  for (const [flag, key] of STREAM_FLAGS) {
    const v = (o as Record<string, unknown>)[attribute(flag)];
    out[key] = typeof v === 'number' ? v : STREAM_LIMIT_DEFAULTS[key];
  }
  return out as StreamLimits;
}
