import { describe, expect, it } from 'vitest';
import { contendedMs, DEFAULT_TIMING } from '../support/api-property.ts';

/**
 * The API property's estimate of the work in a job's way (test/support/api-property.ts), which
 * decides whether a job may still be running when a scenario ends. The scenario below is the
 * one a run on etcd reported: a job of 24 short tasks that may use only the 8 RUs of one
 * platform in one zone, beside two jobs at priority 999 whose tasks the cell's interference
 * model slows down; the job was still running 6.2 s after its submission, though the whole
 * scenario's work at full speed is 1.4 s of the cell.
 */
const narrow = {
  name: 'narrow',
  profile: 'spec-gcc',
  tasks: 24,
  priority: 129,
  locality: { mode: 'pack', scope: 'rack' },
  constraints: { platforms: ['m3-large'], attributes: { zone: 'demo-a' } },
  durationMs: 45,
};
const scenario = [
  { name: 'a', profile: 'parsec-streamcluster', tasks: 4, priority: 104, locality: { scope: 'server', required: true }, durationMs: 62 },
  narrow,
  { name: 'b', profile: { caused: [71, 22, 11, 18, 77, 47, 27, 17, 8, 66] }, tasks: 24, priority: 999, durationMs: 1000 },
  {
    name: 'c',
    profile: 'tpch-agg',
    tasks: 3,
    priority: 660,
    mode: 'gang',
    constraints: { platforms: ['m3-large', 'r3-xlarge'], attributes: { zone: 'demo-a' } },
    durationMs: 1000,
  },
  { name: 'd', profile: { caused: [57, 93, 14, 37, 35, 10, 96, 20, 38, 58] }, tasks: 25, priority: 999, durationMs: 191 },
];

describe('API property: the work in a job`s way', () => {
  it('counts the other jobs` work on the RUs a narrowly constrained job may use, slowed by their neighbours', () => {
    expect(contendedMs(narrow, scenario)).toBeGreaterThan(DEFAULT_TIMING.heavyMs);
  });

  it('does not excuse the same job alone in the cell, nor a short job beside short ones', () => {
    expect(contendedMs(narrow, [narrow])).toBeLessThan(DEFAULT_TIMING.heavyMs);
    const short = { name: 's', profile: 'spark-lr', tasks: 2, durationMs: 20 };
    expect(contendedMs(short, [short, { ...short, name: 't' }, { ...short, name: 'u', tasks: 8 }])).toBeLessThan(DEFAULT_TIMING.heavyMs / 10);
  });

  it('counts only the share of another job`s work that can land on the job`s RUs', () => {
    const elsewhere = { name: 'e', profile: 'spark-lr', tasks: 24, durationMs: 1000, constraints: { platforms: ['c3-large'] } };
    const here = { name: 'h', profile: 'spark-lr', tasks: 2, durationMs: 20, constraints: { platforms: ['m3-large'] } };
    const everywhere = { ...elsewhere, name: 'w', constraints: {} };
    expect(contendedMs(here, [here, elsewhere])).toBeLessThan(contendedMs(here, [here, everywhere]));
  });
});
