/**
 * Structured logging (pino) on stderr: human-readable lines through the pino-pretty transport
 * when stderr is a terminal, one JSON object per line otherwise. stdout stays for what a command
 * prints (the banner of `tarcil up` and `tarcil server`, tables, JSON answers).
 */
import { pino, type DestinationStream, type Logger } from 'pino';
import { invalid } from './errors.ts';

export type { Logger };

export const LOG_LEVELS = ['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];
export const LOG_FORMATS = ['json', 'pretty'] as const;
export type LogFormat = (typeof LOG_FORMATS)[number];

function isLevel(s: string): s is LogLevel {
  return (LOG_LEVELS as readonly string[]).includes(s);
}

/**
 * The level a logger runs at: TARCIL_LOG when set, else `fallback`; silent under vitest unless
 * TARCIL_LOG is set. A TARCIL_LOG that is no level is refused, naming the variable and the rule.
 */
export function logLevel(fallback: string = 'info'): LogLevel {
  const env = process.env.TARCIL_LOG;
  if (env === undefined || env === '') return process.env.VITEST !== undefined ? 'silent' : checkLevel('level', fallback);
  return checkLevel('TARCIL_LOG', env);
}

function checkLevel(field: string, s: string): LogLevel {
  const l = s.trim().toLowerCase();
  if (!isLevel(l)) throw invalid(field, `"${s}" is no log level (one of ${LOG_LEVELS.join(', ')})`);
  return l;
}

/** TARCIL_LOG_FORMAT (json or pretty) when set, else pretty on a terminal and JSON otherwise. */
export function logFormat(): LogFormat {
  const env = process.env.TARCIL_LOG_FORMAT;
  if (env === undefined || env === '') return process.stderr.isTTY ? 'pretty' : 'json';
  const f = env.trim().toLowerCase();
  if (f !== 'json' && f !== 'pretty') throw invalid('TARCIL_LOG_FORMAT', `"${env}" is no log format (one of ${LOG_FORMATS.join(', ')})`);
  return f;
}

/**
 * One stream per process and format, shared by every logger: JSON goes straight to fd 2
 * (synchronous, so nothing is lost when a daemon exits on a fatal error); pretty lines through
 * pino-pretty in pino's transport worker, which pino flushes when the process exits.
 */
const streams = new Map<LogFormat, DestinationStream>();

function destination(format: LogFormat): DestinationStream {
  let s = streams.get(format);
  if (!s) {
    s =
      format === 'json'
        ? pino.destination({ dest: 2, sync: true })
        : pino.transport({
            target: 'pino-pretty',
            options: {
              destination: 2,
              colorize: process.stderr.isTTY === true && !process.env.NO_COLOR && process.env.TERM !== 'dumb',
              singleLine: true,
              translateTime: 'SYS:HH:MM:ss.l',
              ignore: 'pid,hostname',
            },
          });
    streams.set(format, s);
  }
  return s;
}

/** Writes to the format's stream, opened at the first line: a command that logs nothing starts no transport worker. */
function lazyDestination(format: LogFormat): DestinationStream {
  return { write: (line: string) => destination(format).write(line) };
}

/**
 * Structured logs, object first: `log.info({ job, R }, 'committed')`. Level from TARCIL_LOG, else
 * `fallback` (info); silent under vitest unless TARCIL_LOG is set. A key bound by a child logger
 * must not be repeated in a call's object, nor bound again by a child of it: pino writes it twice
 * (see `withBindings`).
 */
export function createLogger(name = 'tarcil', fallback: string = 'info'): Logger {
  const level = logLevel(fallback);
  return pino({ name, level, ...boundedLogOptions }, lazyDestination(logFormat()));
}

/** Longest string a log line carries in one field (a stack fits; a 20,000-character name from a request does not). */
export const LOG_VALUE_CHARS = 4000;

const cut = (v: unknown): unknown => (typeof v === 'string' && v.length > LOG_VALUE_CHARS ? `${v.slice(0, LOG_VALUE_CHARS)}… (${v.length} characters)` : v);

/**
 * Every logger's strings bounded: the message and each top-level field of the line's object. A
 * request's values reach log lines through error messages; cut here, no call site can forget.
 */
export const boundedLogOptions = {
  formatters: {
    log(obj: Record<string, unknown>): Record<string, unknown> {
      for (const k of Object.keys(obj)) {
        const v = obj[k];
        if (typeof v === 'string' && v.length > LOG_VALUE_CHARS) obj[k] = cut(v);
      }
      return obj;
    },
  },
  hooks: {
    logMethod(this: Logger, args: unknown[], method: (...a: unknown[]) => void): void {
      method.apply(this, args.map(cut));
    },
  },
};

/**
 * `log` carrying these bindings: `log` itself when it binds them already, a child binding the
 * missing ones otherwise. Code that runs under loggers of different bindings (a node's code under
 * a monitor's logger, which names its server, and under a hollow process's, which does not) names
 * its context this way instead of repeating it in each call. A key the parent binds already keeps
 * the parent's value (binding it again would write it twice).
 */
export function withBindings(log: Logger, bindings: Record<string, string | number>): Logger {
  const have = log.bindings();
  const missing = Object.entries(bindings).filter(([k]) => !(k in have));
  return missing.length === 0 ? log : log.child(Object.fromEntries(missing));
}

/** The process's logger for modules that are handed none (the stores); a bad TARCIL_LOG falls back to info here and is reported by the daemon's own logger. */
export const rootLogger: Logger = pino({ name: 'tarcil', level: safeLevel(), ...boundedLogOptions }, lazyDestination(safeFormat()));

function safeLevel(): LogLevel {
  try {
    return logLevel();
  } catch {
    return 'info';
  }
}

function safeFormat(): LogFormat {
  try {
    return logFormat();
  } catch {
    return 'json';
  }
}
