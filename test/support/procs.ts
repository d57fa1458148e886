import { spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream, mkdirSync } from 'node:fs';
import { join } from 'node:path';

const BIN = join(import.meta.dirname, '..', '..', 'src', 'cli', 'bin.js');

/** A `tarcil` child process, with its output kept for failure messages. */
export interface TarcilProc {
  child: ChildProcess;
  output(): string;
  /** Resolves with the first stdout line matching re (its match). */
  waitFor(re: RegExp, timeoutMs?: number): Promise<RegExpMatchArray>;
  kill(sig?: NodeJS.Signals): Promise<void>;
}

/**
 * Starts `tarcil args`. TARCIL_NODE_ARGS (space-separated) is passed to node first, e.g.
 * `--cpu-prof --cpu-prof-dir=/tmp/prof` to profile every process a benchmark starts (with
 * TARCIL_KILL_GRACE_MS long enough for a process to exit by itself and write its profile).
 * TARCIL_PROC_LOG_DIR keeps every process's whole output there (`<command>-<pid>.log`), not
 * only the last 200 KB; TARCIL_PROC_LOG sets their log level (default warn).
 */
export function tarcil(args: string[], env: Record<string, string> = {}): TarcilProc {
  const nodeArgs = (process.env.TARCIL_NODE_ARGS ?? '').split(' ').filter(Boolean);
  const child = spawn(process.execPath, [...nodeArgs, BIN, ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, TARCIL_LOG: process.env.TARCIL_PROC_LOG ?? 'warn', ...env },
  });
  const dir = process.env.TARCIL_PROC_LOG_DIR;
  // Made if missing: a stream that cannot open its file would throw out of the benchmark, leaving its etcd running.
  if (dir) mkdirSync(dir, { recursive: true });
  const file = dir ? createWriteStream(join(dir, `${args[0] ?? 'tarcil'}-${child.pid ?? 'x'}.log`)) : undefined;
  let out = '';
  const listeners = new Set<() => void>();
  const onData = (d: Buffer): void => {
    out = (out + d.toString()).slice(-200_000);
    file?.write(d);
    for (const l of listeners) l();
  };
  child.stdout?.on('data', onData);
  child.stderr?.on('data', onData);
  // After its output streams closed: everything it wrote is in the file.
  if (file) child.once('close', () => file.end());
  return {
    child,
    output: () => out,
    waitFor: (re, timeoutMs = 30_000) =>
      new Promise((resolve, reject) => {
        const check = (): void => {
          const m = re.exec(out);
          if (m) {
            listeners.delete(check);
            clearTimeout(t);
            resolve(m);
          }
        };
        const t = setTimeout(() => {
          listeners.delete(check);
          reject(new Error(`timed out waiting for ${re} from tarcil ${args.join(' ')}; output:\n${out.slice(-4000)}`));
        }, timeoutMs);
        child.once('exit', (code) => {
          if (!re.exec(out)) reject(new Error(`tarcil ${args.join(' ')} exited (${code}) before ${re}; output:\n${out.slice(-4000)}`));
        });
        listeners.add(check);
        check();
      }),
    kill: (sig = 'SIGTERM') =>
      new Promise<void>((resolve) => {
        if (child.exitCode !== null || child.signalCode !== null) return resolve();
        child.once('exit', () => resolve());
        child.kill(sig);
        setTimeout(() => child.kill('SIGKILL'), Number(process.env.TARCIL_KILL_GRACE_MS ?? 10_000)).unref();
      }),
  };
}
