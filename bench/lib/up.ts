/**
 * `tarcil up` in a process of its own, on free ports, as `npm start` runs it: for benchmarks that
 * measure the scheduler from outside. It binds port 0 for each of its servers (any free port) and
 * its banner names the ports it got.
 */
import { spawn, type ChildProcessByStdio } from 'node:child_process';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import { fileURLToPath } from 'node:url';

const ROOT = join(fileURLToPath(import.meta.url), '..', '..', '..');

export interface UpProcess {
  proc: ChildProcessByStdio<null, Readable, null>;
  port: number;
  metricsPort: number;
  httpPort: number;
  /** SIGTERM, then the process's exit. */
  stop(): Promise<void>;
}

/** The banner's lines that name the ports: the Scheduler's gRPC address, /metrics and the dashboard. */
const BANNER = {
  port: /^ {2}Scheduler gRPC\s+\S+:(\d+)\s/m,
  metricsPort: /^ {2}metrics\s+https?:\/\/\S+:(\d+)\/metrics$/m,
  httpPort: /^ {2}dashboard\s+https?:\/\/\S+:(\d+)\//m,
};

/**
 * Starts `tarcil up` with `args` (after the ports), Node flags `nodeArgs` before the script, and
 * resolves once its banner names the Scheduler, metrics and dashboard ports; rejects if it exits first.
 */
export async function startUp(args: string[] = [], nodeArgs: string[] = []): Promise<UpProcess> {
  const proc = spawn(
    process.execPath,
    [...nodeArgs, join(ROOT, 'src', 'cli', 'bin.js'), 'up', '--port', '0', '--metrics-port', '0', '--http-port', '0', ...args],
    {
      cwd: ROOT,
      stdio: ['ignore', 'pipe', 'inherit'],
      env: { ...process.env, TARCIL_LOG: process.env.TARCIL_LOG ?? 'warn' },
    },
  );
  const { port, metricsPort, httpPort } = await new Promise<Record<keyof typeof BANNER, number>>((resolve, reject) => {
    let out = '';
    proc.stdout.on('data', (b: Buffer) => {
      out += b.toString();
      const [port, metricsPort, httpPort] = [BANNER.port, BANNER.metricsPort, BANNER.httpPort].map((re) => re.exec(out)?.[1]);
      if (port && metricsPort && httpPort) resolve({ port: Number(port), metricsPort: Number(metricsPort), httpPort: Number(httpPort) });
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
