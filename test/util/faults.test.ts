import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

/**
 * A daemon's answer to an error no code caught (src/util/faults.ts), in a child process of its
 * own: an unhandled rejection is logged with an incident id and the process goes on; an uncaught
 * exception ends it with code 70 and a line that says what it loses.
 */
const FAULTS = join(import.meta.dirname, '..', '..', 'src', 'util', 'faults.ts');
const LOG = join(import.meta.dirname, '..', '..', 'src', 'util', 'log.ts');

function run(body: string, embedded: boolean): { status: number | null; stdout: string; stderr: string } {
  const script = `
    const { installFaultPolicy } = await import(${JSON.stringify(FAULTS)});
    const { createLogger } = await import(${JSON.stringify(LOG)});
    const policy = installFaultPolicy(createLogger('t'), { who: 'server', embedded: ${embedded} });
    ${body}
  `;
  const r = spawnSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
    encoding: 'utf8',
    env: { ...process.env, TARCIL_LOG: 'info', TARCIL_LOG_FORMAT: 'json' },
    timeout: 30_000,
  });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

describe('the fault policy of a daemon', () => {
  it('logs an unhandled rejection with an incident id and keeps serving', () => {
    const r = run(
      `Promise.reject(new Error('lost in the background'));
       setTimeout(() => { process.stdout.write('still serving after ' + policy.rejections() + ' rejection(s)\\n'); }, 100);`,
      true,
    );
    expect(r.status).toBe(0);
    expect(r.stdout).toContain('still serving after 1 rejection(s)');
    expect(r.stderr).toMatch(/"incident":"e-[0-9a-f]{8}"/);
    expect(r.stderr).toContain('lost in the background');
  });

  it('exits with code 70 on an uncaught exception, saying the embedded store lost its jobs', () => {
    const r = run(`setTimeout(() => { throw new Error('broken invariant'); }, 10); setTimeout(() => process.stdout.write('went on\\n'), 500);`, true);
    expect(r.status).toBe(70);
    expect(r.stdout).not.toContain('went on');
    expect(r.stderr).toMatch(/tarcil server: uncaught exception \(incident e-[0-9a-f]{8}\): broken invariant\. Its jobs were held by the embedded store/);
  });

  it('on etcd, says the jobs stay in the store', () => {
    const r = run(`setTimeout(() => { throw new Error('broken invariant'); }, 10);`, false);
    expect(r.status).toBe(70);
    expect(r.stderr).toContain('Its jobs are in the store');
  });
});
