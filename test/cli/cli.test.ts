import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { EXPERIMENTS } from '../../src/sim/experiments/index.ts';

const BIN = fileURLToPath(new URL('../../src/cli/bin.js', import.meta.url));

function tarcil(...args: string[]): { code: number; out: string; err: string } {
  const r = spawnSync(process.execPath, [BIN, ...args], { encoding: 'utf8', env: { ...process.env, TARCIL_LOG: 'silent' } });
  return { code: r.status ?? -1, out: r.stdout, err: r.stderr };
}

describe('tarcil sample-size', () => {
  it('gives R = 31 for the 0.8 quantile at 1e-3, and its guarantee', () => {
    const r = tarcil('sample-size', '--quantile', '0.8', '--fail-prob', '1e-3');
    expect(r.code).toBe(0);
    expect(r.out).toContain('= 31');
    expect(r.out).toMatch(/0\.8000\^31 = 9\.\d+e-4/);
  });

  it('gives R = 83 for 8 good RUs of 100, beyond the agents’ cap of 32', () => {
    const r = tarcil('sample-size', '--good', '8', '--population', '100', '--fail-prob', '1e-3', '--json');
    expect(r.code).toBe(0);
    const j = JSON.parse(r.out) as { R: number; capped: number; cappedFailProb: number };
    expect(j.R).toBe(83);
    expect(j.capped).toBe(32);
    expect(j.cappedFailProb).toBeCloseTo(0.92 ** 32, 10);
  });

  it('rejects bad flags naming the flag and the rule, with exit code 2', () => {
    const r = tarcil('sample-size', '--quantile', '1.5');
    expect(r.code).toBe(2);
    expect(r.err).toContain('--quantile must be in (0, 1)');
    const g = tarcil('sample-size', '--good', '8');
    expect(g.code).toBe(2);
    expect(g.err).toContain('--good/--population: must be given together');
  });
});

describe('tarcil bench', () => {
  it('lists every registered experiment in `tarcil bench --help`', () => {
    const r = tarcil('bench', '--help');
    expect(r.code).toBe(0);
    const listed = r.out.replace(/\s+/g, ' ');
    const names = Object.keys(EXPERIMENTS);
    expect(names.length).toBeGreaterThan(10);
    for (const name of names) expect(listed).toMatch(new RegExp(`[ :,]${name}(,|\\s|$)`));
  });

  it('names the known experiments when given an unknown one, with exit code 2', () => {
    const r = tarcil('bench', 'no-such-experiment', '--quick');
    expect(r.code).toBe(2);
    expect(r.err).toContain("unknown experiment 'no-such-experiment'");
    for (const name of Object.keys(EXPERIMENTS)) expect(r.err).toContain(name);
  });
});

describe('tarcil profile', () => {
  it('prints T_W, the resource order and the acceptable buckets on a loaded cluster', () => {
    const r = tarcil('profile', 'memcached', '--cluster', 'ec2-100', '--load', '0.6', '--json');
    expect(r.code).toBe(0);
    const j = JSON.parse(r.out) as { T: number; order: { resource: string }[]; buckets: { acceptable: boolean; free: number }[]; f: number; R: number };
    expect(j.T).toBeGreaterThan(0.5);
    expect(j.order).toHaveLength(10);
    expect(j.buckets.some((b) => b.acceptable)).toBe(true);
    expect(j.f).toBeGreaterThan(0);
    expect(j.f).toBeLessThanOrEqual(1);
    expect(j.R).toBeGreaterThanOrEqual(8);
    // A tolerant job (lower T_W) finds more of the same loaded cluster acceptable, so it needs
    // a smaller sample.
    const tolerant = JSON.parse(tarcil('profile', 'tpch-scan', '--cluster', 'ec2-100', '--load', '0.6', '--json').out) as { f: number; T: number; R: number };
    expect(tolerant.T).toBeLessThan(j.T);
    expect(tolerant.f).toBeGreaterThan(j.f);
    expect(tolerant.R).toBeLessThan(j.R);
  });

  it('names an unknown profile', () => {
    const r = tarcil('profile', 'no-such-profile');
    expect(r.code).toBe(2);
    expect(r.err).toContain('no-such-profile');
  });

  it('prints a readable table by default', () => {
    const r = tarcil('profile', 'spark-lr', '--cluster', 'demo');
    expect(r.code).toBe(0);
    expect(r.out).toContain('T_W = ');
    expect(r.out).toContain('acceptable');
  });
});

describe('tarcil server', () => {
  it('rejects a bad --group-commit naming the flag and the rule, with exit code 2', () => {
    const r = tarcil('server', '--group-commit', '-1');
    expect(r.code).toBe(2);
    expect(r.err).toContain('--group-commit must be an integer in [0, 64]');
  });

  it('rejects a bad --etcd-max-txn-ops naming the flag and the rule, with exit code 2', () => {
    const r = tarcil('server', '--etcd-max-txn-ops', '8');
    expect(r.code).toBe(2);
    expect(r.err).toContain('--etcd-max-txn-ops must be an integer in [16, 100000]');
  });

  it('rejects a bad --agent option naming the option and the rule, with exit code 2', () => {
    const bad = tarcil('server', '--agent', 'capR=0');
    expect(bad.code).toBe(2);
    expect(bad.err).toContain('agent.capR: must be an integer in [1, 1024]');
    const unknown = tarcil('server', '--agent', 'recordJob=false');
    expect(unknown.code).toBe(2);
    expect(unknown.err).toContain('agent.recordJob: is not an agent option');
    const pair = tarcil('server', '--agent', 'minR=40', '--agent', 'capR=32');
    expect(pair.code).toBe(2);
    expect(pair.err).toContain('agent.minR: must not exceed capR');
  });

  it('rejects a bad --retain or --compact-margin naming the flag and the rule, with exit code 2', () => {
    for (const [flag, value, rule] of [
      ['--retain', '0', 'at least 1s, at most 720h'],
      ['--retain', '2d', 'such as 1500ms, 90s, 30m or 1h'],
      ['--retain', '31d', 'such as 1500ms, 90s, 30m or 1h'],
      ['--compact-margin', '5s', 'at least 10s, at most 24h, or off'],
    ] as const) {
      for (const cmd of ['server', 'up']) {
        const r = tarcil(cmd, flag, value);
        expect(r.code, `${cmd} ${flag} ${value}`).toBe(2);
        expect(r.err).toContain(`${flag} must be a duration`);
        expect(r.err).toContain(rule);
        expect(r.err).toContain(`(got '${value}')`);
      }
    }
  });

  it('rejects an unknown flag with exit code 2', () => {
    const r = tarcil('server', '--no-such-flag');
    expect(r.code).toBe(2);
    expect(r.err).toContain("unknown option '--no-such-flag'");
  });
});
