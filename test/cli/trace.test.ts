/**
 * `tarcil trace inspect`: the summary of a generated trace, and exit code 2 with the row's file,
 * line and column for a bad one.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';

const BIN = fileURLToPath(new URL('../../src/cli/bin.js', import.meta.url));
const dir = mkdtempSync(join(tmpdir(), 'tarcil-trace-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function file(name: string, lines: string[]): string {
  const p = join(dir, name);
  writeFileSync(p, `${lines.join('\n')}\n`);
  return p;
}

function tarcil(...args: string[]): { code: number | null; out: string; err: string } {
  const r = spawnSync(process.execPath, [BIN, ...args], { encoding: 'utf8', env: { ...process.env, TARCIL_LOG: 'silent', NO_COLOR: '1' } });
  return { code: r.status, out: r.stdout, err: r.stderr };
}

const nodes = file('nodes.csv', ['sn,cpu_milli,memory_mib,gpu,model', 'a,32000,1,0,', 'b,32000,1,0,', 'c,16000,1,4,T4']);
const H = 'name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time';
const pods = file('pods.csv', [
  H,
  'p1,4000,1,0,0,,LS,Running,0,100,1',
  'p2,12000,1,1,500,T4,BE,Running,10,50,',
  'p3,40000,1,0,0,,Burstable,Failed,20,30,25',
  'p4,1000,1,0,0,,BE,Succeeded,30,90,31',
]);

describe('tarcil trace inspect', () => {
  it('prints servers by platform, jobs by QoS and size, never-scheduled and unmappable pods', () => {
    const r = tarcil('trace', 'inspect', '--nodes', nodes, '--pods', pods, '--compress', '10');
    expect(r.err).toBe('');
    expect(r.code).toBe(0);
    expect(r.out).toContain('servers: 3, 80 RUs');
    expect(r.out).toMatch(/^ {2}cpu +2 +64$/m);
    expect(r.out).toMatch(/^ {2}T4 +1 +16$/m);
    expect(r.out).toContain('jobs: 3, 17 tasks (times compressed 10x)');
    expect(r.out).toMatch(/^ {2}LS +120 +1 +4$/m);
    expect(r.out).toMatch(/^ {2}BE +80 +2 +13$/m);
    expect(r.out).toMatch(/^ {2}9-16 +1$/m);
    expect(r.out).toContain('never scheduled in production: 1');
    expect(r.out).toContain('unmappable: 1\n  line 4 p3: no node has 40 cores');
  });

  it('a bad row: exit code 2, the file, line, column and rule', () => {
    const bad = file('bad.csv', [H, 'p1,4000,1,0,0,,LS,Running,0,100,1', 'p2,4000,1,0,0,,Platinum,Running,0,100,1']);
    const r = tarcil('trace', 'inspect', '--nodes', nodes, '--pods', bad);
    expect(r.code).toBe(2);
    expect(r.out).toBe('');
    expect(r.err).toContain('bad.csv:3: column qos: must be one of LS, Guaranteed, Burstable, BE, is "Platinum"');
  });

  it('a missing file or a bad flag: exit code 2', () => {
    const missing = tarcil('trace', 'inspect', '--nodes', join(dir, 'none.csv'), '--pods', pods);
    expect(missing.code).toBe(2);
    expect(missing.err).toContain('--nodes: cannot read');
    expect(tarcil('trace', 'inspect', '--nodes', nodes, '--pods', pods, '--compress', '0').code).toBe(2);
    expect(tarcil('trace', 'inspect', '--nodes', nodes, '--pods', pods, '--format', 'csv').code).toBe(2);
  });
});
