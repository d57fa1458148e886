/**
 * `tarcil up` in a process of its own, on free ports, as `npm start` runs it: for benchmarks that
 * measure the scheduler from outside.
 */
import { spawn, type ChildProcessByStdio } from 'node:child_process';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { freePort } from '../../test/support/etcd.ts';

const ROOT = join(fileURLToPath(import.meta.url), '..', '..', '..');

export interface UpProcess {
  proc: ChildProcessByStdio<null, Readable, null>;
  port: number;
  metricsPort: number;
  httpPort: number;
  /** SIGTERM, then the process's exit. */
  stop(): Promise<void>;
}

/**
 * Starts `tarcil up` with `args` (after the ports), Node flags `nodeArgs` before the script, and
 * resolves once its banner names the Scheduler port; rejects if it exits first.
 */
export async function startUp(args: string[] = [], nodeArgs: string[] = []): Promise<UpProcess> {
  const [port, metricsPort, httpPort] = [await freePort(), await freePort(), await freePort()];
  const proc = spawn(process.execPath, [...nodeArgs, join(ROOT, 'src', 'cli', 'bin.js'), 'up', '--port', String(port), '--metrics-port', String(metricsPort), '--http-port', String(httpPort), ...args], {
    cwd: ROOT,
    stdio: ['ignore', 'pipe', 'inherit'],
    env: { ...process.env, TARCIL_LOG: process.env.TARCIL_LOG ?? 'warn' },
  });
  await new Promise<void>((resolve, reject) => {
    let out = '';
    proc.stdout.on('data', (b: Buffer) => {
      out += b.toString();
      if (out.includes('Scheduler gRPC')) resolve();
    });
    proc.on('exit', (code) => reject(new Error(`tarcil up exited ${code}`)));
  });
  return {
    proc,
    port,
    metricsPort,
    httpPort,
    stop: async () => {
      if (proc.exitCode !== null) return;
      proc.kill('SIGTERM');
      await new Promise((r) => proc.once('exit', r));
    },
  };
}
