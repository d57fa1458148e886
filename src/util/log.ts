/**
 * Structured logging (pino), one JSON object per line; silent under the tests unless TARCIL_LOG is
 * set.
 */
import { pino, type Logger } from 'pino';

export type { Logger };

/**
 * Structured logs, object first: `log.info({ jobId, R }, 'committed')`. Silent under vitest and
 * when TARCIL_LOG=silent; level from TARCIL_LOG otherwise (default info). Pretty printing is left
 * to a pipe (`| npx pino-pretty`) so production output stays one JSON object per line.
 */
export function createLogger(name = 'tarcil', level?: string): Logger {
  const env = process.env.TARCIL_LOG;
  const silent = process.env.VITEST !== undefined && env === undefined;
  return pino({ name, level: silent ? 'silent' : (level ?? env ?? 'info') });
}

export const rootLogger: Logger = createLogger();
