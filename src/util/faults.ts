/**
 * What a daemon (`tarcil server`, `monitor`, `up`, `hollow`) does with an error no code caught.
 *
 * - A rejected promise nobody handles: logged at error level with an incident id and counted,
 *   and the process goes on serving. Every RPC already answers its own faults (rpc/guard.ts),
 *   so what is left is a background task's failure: its state is the task's own, and the store
 *   stays the truth that the next evaluation, lease renewal or watch event reads again.
 * - An exception thrown out of a callback (a timer, an event handler): the synchronous code it
 *   unwound may have left this process's state half-changed, so the process logs it as fatal,
 *   says on stderr what it loses (with the embedded store, every job: the banner says so at
 *   start) and exits with code 70; another front-end (or a restart) takes its jobs up.
 */
import { randomBytes } from 'node:crypto';
import { errorMessage } from './errors.ts';
import type { Logger } from './log.ts';

/** Exit code after an uncaught exception (EX_SOFTWARE). */
export const FAULT_EXIT_CODE = 70;

export interface FaultPolicy {
  /** Unhandled rejections seen so far. */
  readonly rejections: () => number;
  stop(): void;
}

/** Installs the policy above; `embedded` says the process's jobs are held by its memory store. */
export function installFaultPolicy(log: Logger, o: { who: string; embedded: boolean }): FaultPolicy {
  let rejections = 0;
  const onRejection = (reason: unknown): void => {
    rejections++;
    const incident = `e-${randomBytes(4).toString('hex')}`;
    log.error(
      { incident, err: errorMessage(reason), stack: reason instanceof Error ? reason.stack : undefined, rejections },
      'unhandled rejection: logged, still serving',
    );
  };
  const onException = (err: unknown): void => {
    const incident = `e-${randomBytes(4).toString('hex')}`;
    log.fatal({ incident, err: errorMessage(err), stack: err instanceof Error ? err.stack : undefined }, 'uncaught exception: exiting');
    const lost = o.embedded
      ? ' Its jobs were held by the embedded store (memory://) and are lost.'
      : ' Its jobs are in the store: another front-end, or this one restarted, takes them up.';
    process.stderr.write(`tarcil ${o.who}: uncaught exception (incident ${incident}): ${errorMessage(err)}.${lost}\n`);
    process.exit(FAULT_EXIT_CODE);
  };
  process.on('unhandledRejection', onRejection);
  process.on('uncaughtException', onException);
  return {
    rejections: () => rejections,
    stop: () => {
      process.off('unhandledRejection', onRejection);
      process.off('uncaughtException', onException);
    },
  };
}
